"""Every JSON the tool writes: a document as one line (to_json), laid out for a person
(pretty_json), written to stdout (write_json, write_bytes), and the characters a terminal
would act on written as escapes inside it (json_safe). JSON keeps text from outside exact;
only the escapes make it safe to show.
"""

from __future__ import annotations

import json
import re
import sys

try:
    import orjson
except ImportError:  # a dependency; the standard library writes the same JSON without it
    orjson = None

# What JSON's own escaping (control characters below U+0020 only) lets through raw and a
# terminal acts on: DEL and the C1 controls (U+009B is an 8-bit CSI), the format characters
# (zero-width ones, bidi embeddings, overrides and isolates, the byte order mark, the
# interlinear annotations and the tags), the line and paragraph separators, and lone
# surrogates (a file name that is not UTF-8). In a JSON string each is written as \\uXXXX:
# the text stays exact to any JSON reader, and a terminal showing the JSON sees none.
JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000110bd\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]")


def json_safe(line: str) -> str:
    """A line of JSON with every JSON_UNSAFE character inside it written as an escape."""
    if line.isascii() and "\x7f" not in line:  # DEL is ASCII, and unsafe
        return line
    return JSON_UNSAFE.sub(lambda m: "".join(f"\\u{u:04x}" for u in _utf16(m.group())), line)


def _utf16(c: str) -> tuple[int, ...]:
    n = ord(c)
    if n < 0x10000:
        return (n,)
    n -= 0x10000
    return (0xD800 + (n >> 10), 0xDC00 + (n & 0x3FF))  # JSON escapes beyond the BMP as a surrogate pair


def to_json(doc, *, ascii_only: bool = False) -> str:
    """A document (or any JSON value) as one line of JSON; NaN or infinity would be a bug,
    so refuse them. `ascii_only` writes every other character as a \\u escape, for a stream
    that is not UTF-8; either way, characters a terminal would act on are escapes too
    (json_safe).

    orjson writes it, ten times faster than the standard library (a line's JSON cost more
    than a third of batch's time), the same doubles (each the shortest text that reads back
    as it): but it writes NaN as null, has no ASCII mode, and refuses a lone surrogate (a
    file name's undecodable byte), so where a null appears at all, or in those cases, the
    standard library writes the line instead, and refuses a NaN."""
    if not ascii_only and orjson is not None:
        try:
            line = orjson.dumps(doc).decode("utf-8")
        except (TypeError, orjson.JSONEncodeError):
            line = None
        if line is not None and "null" not in line:
            return json_safe(line)
    return json_safe(json.dumps(doc, ensure_ascii=ascii_only, allow_nan=False, separators=(",", ":")))


def utf8(stream) -> bool:
    return (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-") in ("utf-8", "utf8")


def write_json(doc: dict) -> None:
    """A document as one line of JSON on stdout: UTF-8, or ASCII with \\u escapes where stdout
    is not UTF-8. A file name that is not UTF-8 keeps its bytes as \\udcXX escapes, which
    Python's json and os.fsencode turn back into them."""
    sys.stdout.write(to_json(doc, ascii_only=not utf8(sys.stdout)) + "\n")  # surrogates: escaped by to_json


def write_bytes(data: bytes) -> None:
    """UTF-8 (or ASCII) text already encoded, such as batch's workers send, on stdout: to
    its buffer as it is where stdout is UTF-8, else through its encoding."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None or not utf8(sys.stdout):
        sys.stdout.write(data.decode("utf-8"))
        return
    sys.stdout.flush()  # what was written as text goes first
    buffer.write(data)


def pretty_json(doc: dict, *, ascii_only: bool = False) -> str:
    """A document as JSON laid out for a person reading a terminal: an object a key a line,
    indented by two; an object or list that holds only numbers, strings and the like on one
    line, so that a matrix is a row a line. The same characters are escapes as in to_json
    (a terminal acts on none of them), and it is valid JSON: `jq` reads it as it reads the
    one-line form."""

    def dump(value) -> str:  # the numbers spelled as the one-line form spells them
        return to_json(value, ascii_only=ascii_only)

    def flat(value) -> bool:
        return not isinstance(value, (dict, list, tuple))

    def layout(value, depth: int) -> str:
        pad, inner = "  " * depth, "  " * (depth + 1)
        if isinstance(value, dict):
            if all(flat(v) for v in value.values()):
                return "{" + ", ".join(f"{dump(str(k))}: {dump(v)}" for k, v in value.items()) + "}"
            items = (f"{inner}{dump(str(k))}: {layout(v, depth + 1)}" for k, v in value.items())
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(value, (list, tuple)):
            if all(flat(v) for v in value):
                return "[" + ", ".join(map(dump, value)) + "]"
            return "[\n" + ",\n".join(f"{inner}{layout(v, depth + 1)}" for v in value) + f"\n{pad}]"
        return dump(value)

    return json_safe(layout(doc, 0))
