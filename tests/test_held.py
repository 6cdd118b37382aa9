"""The held outputs are held to what the tool promises and nothing finer (held.py): every
number of every golden moved by a few ulps (a float32 one in its seventh digit) still passes,
as another processor's last bits must; one number moved past the promise fails; and ties,
which a processor's BLAS would order by its noise, go by position whatever kernels run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import held
import test_golden
from helpers import ENTRY_POINT

HERE = Path(__file__).parent
GOLDENS = sorted(p for p in [*(HERE / "golden").iterdir(), *(HERE / "data" / "golden").iterdir()]
                 if not p.name.endswith(".sha256"))


def full(written: str) -> bool:
    """A number written with every digit a float64 needs (JSON's), not rounded for a table."""
    return not held.is_whole(written) and len(written.lower().split("e")[0].lstrip("-").replace(".", "").lstrip("0")) >= 12


def moved(text: str, move) -> str:
    """`text` with each of its full-precision numbers x written as move(x)."""
    return held.NUMBER.sub(lambda m: repr(move(float(m.group()))) if full(m.group()) else m.group(), text)


def compare(path: Path, got: str, kept: str) -> None:
    if path.parent.name == "golden" and path.parent.parent == HERE:
        test_golden.assert_as_held(path.name, got, kept)
    else:
        held.assert_held(got, kept, held.FLOAT32 if path.name.startswith(("neighbors", "compare", "context",
                                                                            "batch.token")) else held.FLOAT64)


def ulps(x: float, rng) -> float:
    """x moved by 1 to 4 ulps, up or down."""
    towards = math.inf if rng.random() < 0.5 else -math.inf
    for _ in range(int(rng.integers(1, 5))):
        x = float(np.nextafter(x, towards))
    return x


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.name)
def test_every_number_moved_by_a_few_ulps_still_passes(path):
    kept = path.read_text(encoding="utf-8")
    rng = np.random.default_rng(len(kept))
    got = moved(kept, lambda x: ulps(x, rng))
    assert got != kept or not any(full(n) for n in held.parts(kept)[1])
    compare(path, got, kept)


def test_float32_numbers_moved_in_their_seventh_digit_still_pass():
    path = HERE / "golden" / "scores-file.jsonl"
    kept = path.read_text(encoding="utf-8")
    got = moved(kept, lambda x: x * (1 + 4e-7))
    assert got != kept
    test_golden.assert_as_held(path.name, got, kept)
    with pytest.raises(AssertionError):  # the float64 promise would refuse it: the case's own is float32's
        held.assert_held_json_lines(got, kept, held.FLOAT64)


@pytest.mark.parametrize("path", [HERE / "golden" / "scores-model.jsonl", HERE / "golden" / "stats.txt",
                                  HERE / "data" / "golden" / "stats.model.txt"], ids=lambda p: p.name)
def test_one_number_moved_past_the_promise_fails(path):
    kept = path.read_text(encoding="utf-8")
    numbers = held.parts(kept)[1]
    k = next(i for i, n in enumerate(numbers) if not held.is_whole(n) and float(n) != 0)
    written = numbers[k]
    if full(written):
        far = repr(float(written) * (1 + 1e-10) + 1e-10)  # a hundred times float64's promise
    else:
        far = f"{float(written) + 2 * held._unit(written):.{len(written.split('.')[1])}f}"  # two units of its last digit
    parts = held.NUMBER.split(kept)
    got = "".join(t + (far if i == k else n) for i, (t, n) in enumerate(zip(parts, numbers))) + parts[-1]
    assert got != kept
    with pytest.raises(AssertionError):
        compare(path, got, kept)


def test_a_whole_number_must_be_the_same():
    assert held.close("17", "17", 1e-12) and not held.close("17", "18", 1e-12)  # an index, a count
    assert held.close("0.100", "0.099", 1e-12)  # a table's 3 places, either side of a half
    assert not held.close("0.101", "0.099", 1e-12)
    assert not held.close("0.08269079992154103", "0.08269079993154103", 1e-12)
    assert held.close("0.08269079992154103", "0.08269079992154102", 1e-12)


def dispatched(*kinds: str) -> str:
    """numpy's dispatched CPU features whose names hold one of `kinds`, as
    NPY_DISABLE_CPU_FEATURES takes them (it warns of a name it does not dispatch, and the
    names differ between numpy's versions: AVX512F in 1.x, X86_V4 in 2.4)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__ as features
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__ as features
    return " ".join(f for f in features if any(kind in f for kind in kinds))


# every kernel OpenBLAS has for an x86 processor's instructions, and numpy's own loops without
# AVX-512 (or AVX2 too): what another machine would sum with
KERNELS = {"SkylakeX": "", "Haswell": dispatched("AVX512", "X86_V4"),
           "Sandybridge": dispatched("AVX512", "X86_V4", "X86_V3", "AVX2", "FMA3")}


def test_ties_and_numbers_are_the_same_whatever_kernels_sum_them(tmp_path):
    """scores on a sentence whose words come back four times, and a document of repeated
    words: identical words' weights are ties, listed by position, and every number within
    float64's promise (float32's for the document), with each kernel OpenBLAS and numpy have
    for this processor (on another kind of processor the variables change nothing)."""
    if sys.platform != "linux" or os.uname().machine not in ("x86_64", "AMD64"):
        pytest.skip("OpenBLAS's x86 kernels")
    doc = tmp_path / "doc.txt"
    doc.write_text("The earth is like an orange. The moon is not. The earth is like an orange.\n")
    runs = {}
    for kernel, disabled in KERNELS.items():
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel, "NPY_DISABLE_CPU_FEATURES": disabled}
        done = [subprocess.run([ENTRY_POINT, *args, "--json"], capture_output=True, text=True, env=env, timeout=120)
                for args in (["scores", test_golden.LONG], ["scores", "--file", str(doc)])]
        assert all(d.returncode == 0 and d.stderr == "" for d in done), [d.stderr for d in done]
        runs[kernel] = [d.stdout for d in done]
    first = runs["SkylakeX"]
    sentence = json.loads(first[0])
    assert [t["index"] for t in sentence["top"][8]] == [17, 26, 35]  # moon: its three others, by position
    for kernel, (words, document) in runs.items():
        doc_ = json.loads(words)
        assert [[t["index"] for t in row] for row in doc_["top"]] == [[t["index"] for t in row]
                                                                       for row in sentence["top"]], kernel
        held.assert_held_json_lines(words, first[0], held.FLOAT64)
        rows = [json.loads(line) for line in document.splitlines()]
        assert [[t["index"] for t in r["top"]] for r in rows] == [[t["index"] for t in json.loads(line)["top"]]
                                                                  for line in first[1].splitlines()], kernel
        held.assert_held_json_lines(document, first[1], held.FLOAT32)
