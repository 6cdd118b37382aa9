"""Held output compared as the tool promises it, not by one processor's last bits.

A run's text (a table, JSON Lines, a picture) is held in a file once; another machine's BLAS
sums the same products in another order (AVX-512 kernels against AVX2 ones), and the last
digits of a float64 move by an ulp or a few, a float32's by a few of its own. So a held
text is compared in parts: the text between its numbers exactly, and each number parsed:

    - a whole number (an index, a count, a table cell's α × 100) exactly;
    - a decimal within `rtol` of the held one (relative to its size, or absolute for
      numbers below 1 in size, whose last digits a cancellation leaves), plus one unit of
      the last digit shown: a number a table rounds to 3 places may round the other way on
      another machine when it lies that close to a half.

rtol is the precision the docs promise for what is compared: 1e-12 for float64 results
(the README's bound for a batched pass against a sentence alone), 2e-6 for float32 ones
(a document's stream, `--precision float32`: "about six significant digits").
"""

from __future__ import annotations

import math
import re

# a number as the tool writes one: -0.099, 1e-05, 3.5E+2, 17, .5; not a part of a word
# (the 2 of "d_k2", the 6 of "glove.6B", a hexadecimal colour) nor of a longer run of digits
NUMBER = re.compile(r"(?<![\w.#])-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
FLOAT64 = 1e-12
FLOAT32 = 2e-6


def parts(text: str) -> tuple[list[str], list[str]]:
    """The text between the numbers (one more piece than numbers), and the numbers as written."""
    return NUMBER.split(text), NUMBER.findall(text)


def _unit(written: str) -> float:
    """One unit of the last digit `written` shows: 0.001 for "0.099", 1e-07 for "1.5e-06"."""
    mantissa, _, exponent = written.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (int(exponent or 0) - decimals)


def is_whole(written: str) -> bool:
    return not any(c in written for c in ".eE")


def close(got: str, held: str, rtol: float) -> bool:
    """Whether the number `got` is `held` as the promise goes (see the module's docstring)."""
    if is_whole(got) and is_whole(held):
        return got == held
    a, b = float(got), float(held)
    if not (math.isfinite(a) and math.isfinite(b)):
        return got == held
    return abs(a - b) <= rtol * max(1.0, abs(a), abs(b)) + max(_unit(got), _unit(held))


def differences(got: str, held: str, rtol: float, most: int = 5) -> list[str]:
    """What differs, said for a person: the first `most` numbers out of the promise, or the
    first place the text between the numbers differs."""
    got_text, got_numbers = parts(got)
    held_text, held_numbers = parts(held)
    if got_text != held_text or len(got_numbers) != len(held_numbers):
        k = next((k for k, (a, b) in enumerate(zip(got_text, held_text)) if a != b), min(len(got_text),
                                                                                          len(held_text)))
        near = "".join(t + n for t, n in zip(held_text[max(0, k - 2):k + 1], held_numbers[max(0, k - 2):k + 1]))
        return [f"the text differs after number {k}: got {got_text[k] if k < len(got_text) else None!r}, held "
                f"{held_text[k] if k < len(held_text) else None!r} (held around it: {near[-120:]!r})"]
    out = []
    for k, (a, b) in enumerate(zip(got_numbers, held_numbers)):
        if not close(a, b, rtol):
            out.append(f"number {k}: got {a}, held {b} (around it: {held_text[k][-60:]!r})")
            if len(out) == most:
                break
    return out


def assert_held(got: str, held: str, rtol: float = FLOAT64) -> None:
    found = differences(got, held, rtol)
    assert not found, "\n".join(found)


# keys whose numbers are computed in float32 wherever they are (docs/reference/json.md): the
# cosines of nearest words, a product over the whole vocabulary
FLOAT32_KEYS = frozenset({"neighbors", "token_neighbors"})


def json_differences(got, held, rtol: float, where: str = "") -> list[str]:
    """Two JSON values compared as assert_held compares text: keys, strings, whole numbers,
    booleans and nulls exactly, other numbers within `rtol` (FLOAT32 under FLOAT32_KEYS)."""
    if isinstance(held, dict):
        if not isinstance(got, dict) or list(got) != list(held):
            return [f"{where or 'the document'}: keys {list(got) if isinstance(got, dict) else got!r}, held "
                    f"{list(held)}"]
        return [d for key in held for d in json_differences(got[key], held[key], max(rtol, FLOAT32)
                                                            if key in FLOAT32_KEYS else rtol, f"{where}.{key}")]
    if isinstance(held, list):
        if not isinstance(got, list) or len(got) != len(held):
            return [f"{where}: {len(got) if isinstance(got, list) else got!r} items, held {len(held)}"]
        return [d for k, (a, b) in enumerate(zip(got, held)) for d in json_differences(a, b, rtol, f"{where}[{k}]")]
    if isinstance(held, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        ok = abs(got - held) <= rtol * max(1.0, abs(got), abs(held)) or (math.isinf(held) and got == held)
        return [] if ok else [f"{where}: got {got!r}, held {held!r}"]
    if type(got) is not type(held) or got != held:
        return [f"{where}: got {got!r}, held {held!r}"]
    return []


def assert_held_json_lines(got: str, held: str, rtol: float = FLOAT64) -> None:
    """JSON Lines (or one pretty document) compared document by document (json_differences)."""
    import json

    def documents(text: str) -> list:
        text = text.strip()
        return [json.loads(text)] if text.startswith("{\n") else [json.loads(line) for line in text.splitlines()]

    found = json_differences(documents(got), documents(held), rtol)
    assert not found, "\n".join(found[:5])


def arrays(path) -> str:
    """A trained .npz as text to hold: each float array's shape, sum, sum of squares and
    eight of its numbers, evenly spaced; every other member as it is. Its bytes depend on
    the processor's BLAS kernels (docs/guide/training.md), its numbers only in their last
    digits."""
    import numpy as np

    lines = []
    with np.load(path) as f:
        for name in f.files:
            a = f[name]
            if a.dtype.kind == "f":
                flat = a.reshape(-1).astype(np.float64)
                sample = flat[np.linspace(0, len(flat) - 1, 8).astype(int)] if len(flat) else flat
                lines.append(f"{name} {a.dtype} {a.shape} sum {float(flat.sum())!r} squares {float((flat * flat).sum())!r} "
                             f"sample {' '.join(repr(float(x)) for x in sample)}")
            else:
                lines.append(f"{name} {a.shape} {a.tolist()!r}")  # a string's width varies with its numbers
    return "\n".join(lines) + "\n"
