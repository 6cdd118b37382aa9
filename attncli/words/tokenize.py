"""Text to tokens, split the way the vectors were made.

GloVe 6B was trained on text lowercased and split by Stanford's PTB tokenizer, so "don't"
becomes "do" "n't", "earth's" becomes "earth" "'s", and punctuation stands alone. These few
Penn Treebank rules are written out here rather than taken from NLTK: importing NLTK costs
more start-up time than the whole of the rest of a run, for a dozen regular expressions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# (pattern, replacement) applied in order; afterwards, splitting on white space gives tokens.
_RULES = [
    (re.compile(r"[\u2018\u2019\u02bc]"), "'"),  # curly apostrophes: the vectors know only '
    (re.compile(r"[\u201c\u201d]"), '"'),
    (re.compile(r"\.\.\.|\u2026"), " ... "),
    (re.compile(r"--|[\u2013\u2014]"), " -- "),
    (re.compile(r"""([;@#$%&!?"()\[\]{}<>*=+|\\/^~`])"""), r" \1 "),
    (re.compile(r":(?!\d)|(?<!\d):"), " : "),  # 10:30 stays one token
    (re.compile(r",(?!\d)|(?<!\d),"), " , "),  # 1,000 stays one token
    (re.compile(r"^'|(?<=\s)'"), " ' "),  # an opening single quote
    # clitics, split off the word before them: do n't, earth 's, they 're, i 'm
    (re.compile(r"(?i)(\w)(n't)\b"), r"\1 \2"),
    (re.compile(r"(?i)(\w)('s|'re|'ve|'ll|'d|'m)\b"), r"\1 \2"),
    (re.compile(r"(?<=[^\s'])'(?=\s|$)"), " ' "),  # a closing single quote, or the plural possessive
]
# A sentence-final or clause-final period is its own token; the dots inside "u.s." or "3.14" are not.
_FINAL_PERIOD = re.compile(r"^(.*[^.])\.$")
_ABBREVIATION = re.compile(r"^(?:[^\W\d_]\.)+$")  # u.s. e.g. p.m.


# Every rule, and the final period, needs a character that is neither a word's (\w) nor a
# space, or the modifier letter apostrophe (a letter to \w): a piece without one is split as
# it is (most sentences, at a sixth of the cost).
_TRIGGER = re.compile(r"[^\w\s]|\u02bc")
_CHUNK = re.compile(r"\S+")
_SPACE = re.compile(r"\s")
# Characters the rules run over at a time. Every rule matches within a run of non-space
# characters and looks at most one character beyond it, a space or the end (^ and $ of a
# piece stand where a space stood), so a text cut just after a space gives the same tokens.
PIECE = 1 << 16


def _pieces(text: str) -> Iterator[str]:
    """`text` in pieces of PIECE characters or a few more, each cut just after a space."""
    start = 0
    while start < len(text):
        space = _SPACE.search(text, start + PIECE)
        end = len(text) if space is None else space.end()
        yield text[start:end]
        start = end


def iter_tokens(text: str, *, lowercase: bool = True) -> Iterator[str]:
    """The tokens of `text` one at a time, so a caller can stop early: a long text's
    tokens are never all held at once (a 100 MB line would take gigabytes as a list), and
    the rules run a piece of it at a time, so the first token costs no pass over the whole
    text (16 s for 100 MB) and no copy of it."""
    for piece in _pieces(text):
        # letters, digits and spaces only: no rule would change the piece, which is split as it is
        tokens = _ruled(piece) if _TRIGGER.search(piece) else (found.group() for found in _CHUNK.finditer(piece))
        for token in tokens:
            yield token.lower() if lowercase else token


def _ruled(piece: str) -> Iterator[str]:
    """The tokens of a piece, by every rule."""
    for pattern, replacement in _RULES:
        piece = pattern.sub(replacement, piece)
    for found in _CHUNK.finditer(piece):
        chunk = found.group()
        match = _FINAL_PERIOD.match(chunk)
        yield from (match.group(1), ".") if match and not _ABBREVIATION.match(chunk) else (chunk,)


def tokenize(text: str, *, lowercase: bool = True) -> list[str]:
    """Split `text` into Penn-Treebank-style tokens, lowercased when the vectors are."""
    return list(iter_tokens(text, lowercase=lowercase))


def is_punctuation(token: str) -> bool:
    """A token made only of Unicode punctuation (the categories P*): , . ! -- "" « ¿ and the
    like. A symbol (the categories S*: $ + = an emoji) is not punctuation: it is a token, looked
    up like a word, and out of vocabulary when it has no vector. The one exception is the grave
    accent (a symbol, Sk): the Penn Treebank writes an opening quote as ``, so in vectors
    trained on its tokens `` is a quote mark."""
    if token[:1].isalnum():  # a letter or a digit first (L*, N*): the common case, answered at once
        return False
    if token.isascii():  # most tokens: answered without importing unicodedata's tables at start-up
        return bool(token) and all(c in _ASCII_PUNCTUATION for c in token)
    import unicodedata

    return bool(token) and all(unicodedata.category(c).startswith("P") or c == "`" for c in token)


# The ASCII characters of the categories P* (tests/test_tokenize.py holds them against
# unicodedata), and the grave accent.
_ASCII_PUNCTUATION = frozenset("!\"#%&'()*,-./:;?@[\\]_{}`")


# One character for one: the replacements of _RULES that keep a text's length, so that a
# token can be found where it stands in the text it came from.
_SAME_LENGTH = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'})


def token_spans(text: str, tokens: list[str]) -> list[tuple[int, int] | None]:
    """Where each of `tokens` (tokenize(text)'s) stands in `text`, as (start, end), found in
    order; None for one the rules made up ("..." from an ellipsis character)."""
    folded = text.translate(_SAME_LENGTH).lower()
    spans, at = [], 0
    for token in tokens:
        start = folded.find(token.lower(), at)
        if start < 0:
            spans.append(None)
            continue
        spans.append((start, start + len(token)))
        at = start + len(token)
    return spans


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """The span (start, end) of `text` without the white space at its ends."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
