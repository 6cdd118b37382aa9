"""Text from outside made safe to show: control characters written out, never sent raw;
and counts and lists written for people.

A sentence, a word of a vectors file, a file name or a JSON field can hold escape
sequences (ESC ] 0 ; title BEL retitles a terminal, ESC c resets it, U+009B is an 8-bit
CSI), bidi overrides (U+202E shows text reversed), NUL, or characters an XML file may not
hold. Wherever such text goes to a terminal, a log line, an SVG or an HTML page, it goes
through `visible` first, which writes each such character out as Python writes it in a
string literal (\\x1b, \\u202e); JSON keeps the text exact, escaped by JSON itself.
"""

from __future__ import annotations

# Kept as they are: ordinary spaces of other scripts (Zs) and private-use characters (Co).
# Every other character str.isprintable() refuses is written out: controls (Cc), format
# characters such as bidi overrides and zero-width joiners (Cf), lone surrogates (Cs),
# unassigned code points and the non-characters U+FFFE, U+FFFF (Cn), and the line and
# paragraph separators (Zl, Zp).
_KEPT = ("Zs", "Co")


def _escape(c: str) -> str:
    n = ord(c)
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def visible(text: str) -> str:
    """`text` with every control or format character written out as an escape."""
    if text.isprintable():
        return text
    import unicodedata  # here, where a character is not printable: its tables are a tenth of a short run's start-up

    return "".join(c if c.isprintable() or unicodedata.category(c) in _KEPT else _escape(c) for c in text)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """A count for people: "1 head", "2 heads", "105,098 lines"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def listed(items: list[str]) -> str:
    """A list for people: "a, b and c"."""
    return " and ".join(filter(None, [", ".join(items[:-1]), *items[-1:]]))


_NUMBERS = (float, int, bool)


def visible_all(value):
    """A document (dicts, lists, strings, numbers) with `visible` applied to every string in
    it, keys included: what a view draws, never what JSON writes."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(k) if isinstance(k, str) else k: visible_all(v) for k, v in value.items()}
    if isinstance(value, list):
        if all(type(v) in _NUMBERS for v in value):  # a row of a matrix: nothing to escape, and T x T of them
            return value
        return [visible_all(v) for v in value]
    if isinstance(value, tuple):
        return tuple(visible_all(v) for v in value)
    return value
