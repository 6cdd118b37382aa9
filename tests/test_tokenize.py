import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.words import tokenize as tokenize_module
from attncli.words.tokenize import is_punctuation, iter_tokens, tokenize


@pytest.mark.parametrize(
    "text,tokens",
    [
        ("The earth is like an orange", ["the", "earth", "is", "like", "an", "orange"]),
        ("Orange is a bright color.", ["orange", "is", "a", "bright", "color", "."]),
        ("Don't stop", ["do", "n't", "stop"]),
        ("the earth's core", ["the", "earth", "'s", "core"]),
        ("They're sure I'm right, we'll see, he'd know, they've won",
         ["they", "'re", "sure", "i", "'m", "right", ",", "we", "'ll", "see", ",", "he", "'d", "know", ",", "they", "'ve", "won"]),
        ("It\u2019s the earth\u2019s", ["it", "'s", "the", "earth", "'s"]),
        ("1,000 people at 10:30 paid 3.50", ["1,000", "people", "at", "10:30", "paid", "3.50"]),
        ("the U.S. and e.g. this", ["the", "u.s.", "and", "e.g.", "this"]),
        ('He said "hi" (twice)...', ["he", "said", '"', "hi", '"', "(", "twice", ")", "..."]),
        ("well-known o'clock", ["well-known", "o'clock"]),
        ("the dogs' bowls", ["the", "dogs", "'", "bowls"]),
        ("wait -- what?!", ["wait", "--", "what", "?", "!"]),
        ("", []),
    ],
)
def test_ptb_style(text, tokens):
    assert tokenize(text) == tokens


def test_case_is_kept_for_cased_vectors():
    assert tokenize("The Earth", lowercase=False) == ["The", "Earth"]


@pytest.mark.parametrize("token,punct", [
    (",", True), ("--", True), ("...", True), ("'s", False), ("n't", False), ("3.5", False), ("é", False),
    ("«", True), ("¿", True), ("。", True), ("!?", True), ('"', True), ("(", True),
    # symbols (Unicode S*) are tokens, not punctuation: emoji, currency, maths, modifiers
    ("🍊", False), ("😀", False), ("$", False), ("+", False), ("=", False), ("^", False), ("`", True),
    ("©", False), ("👍🏽", False), ("❤\ufe0f", False), ("\x00", False),
])
def test_is_punctuation(token, punct):
    assert is_punctuation(token) is punct


def whole_text_tokens(text: str, lowercase: bool = True) -> list[str]:
    """The rules over the whole text at once, as iter_tokens ran them before it took pieces."""
    for pattern, replacement in tokenize_module._RULES:
        text = pattern.sub(replacement, text)
    tokens = []
    for chunk in text.split():
        match = tokenize_module._FINAL_PERIOD.match(chunk)
        tokens += [match.group(1), "."] if match and not tokenize_module._ABBREVIATION.match(chunk) else [chunk]
    return [t.lower() if lowercase else t for t in tokens]


# what the rules look at: quotes, clitics, colons and commas beside digits, dots, dashes, spaces of all kinds
TRICKY = st.lists(st.sampled_from(list("ab'tnsdm:,.-0123?\"(é_") + ["n't", "'s", "...", "\u2019", "\u02bc", "\u2026", "\u2014",
                                                                   " ", "\n", "\t", "\u00a0", "\u2003", "\x1c", "U.S."]),
                  max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(TRICKY, max_size=8), piece=st.integers(1, 12))
def test_pieces_give_the_tokens_of_the_whole_text(parts, piece):
    text = "".join(parts)
    before = tokenize_module.PIECE
    tokenize_module.PIECE = piece  # pieces of a few characters: a cut after nearly every space
    try:
        assert tokenize(text) == whole_text_tokens(text)
        assert tokenize(text, lowercase=False) == whole_text_tokens(text, lowercase=False)
        assert "".join(tokenize_module._pieces(text)) == text
    finally:
        tokenize_module.PIECE = before


def test_a_piece_split_as_it_is_is_one_no_rule_would_change():
    """iter_tokens runs no rule over a piece that _TRIGGER finds nothing in: every character
    any rule of one character can match (and the clitics' and final period's ' and .) is one
    it finds, over all of Unicode, alone and beside a letter or a digit."""
    missed = []
    for code in range(0x110000):
        c = chr(code)
        if tokenize_module._TRIGGER.search(c) is None:
            missed += [(hex(code), pattern.pattern) for pattern, _ in tokenize_module._RULES
                       if pattern.search(c) or pattern.search("a" + c) or pattern.search(c + "1")]
    assert missed == []
    assert all(tokenize_module._TRIGGER.search(c) for c in "'.")


def test_a_long_text_is_tokenized_a_piece_at_a_time(monkeypatch):
    """The first token of 100 MB comes at once: the rules never run over the whole text."""
    seen = []
    real = tokenize_module._RULES[0][0]

    class Counting:
        def sub(self, replacement, text):
            seen.append(len(text))
            return real.sub(replacement, text)

    monkeypatch.setattr(tokenize_module, "_RULES", [(Counting(), tokenize_module._RULES[0][1]),
                                                    *tokenize_module._RULES[1:]])
    text = "The earth's core, 10:30 \u2019tis... " * 3_000_000  # 102 MB
    tokens = iter_tokens(text)
    assert [next(tokens) for _ in range(4)] == ["the", "earth", "'s", "core"]
    assert len(seen) == 1 and tokenize_module.PIECE < seen[0] < tokenize_module.PIECE + 40  # to the next space


def test_the_treebank_opening_quote_is_punctuation():
    from attncli.words.tokenize import is_punctuation

    assert is_punctuation("``") and is_punctuation("''") and is_punctuation("`")
    assert not is_punctuation("^") and not is_punctuation("`a")


def test_the_ascii_shortcut_is_unicodes_punctuation():
    """is_punctuation answers ASCII tokens from a set of its own, not unicodedata: every ASCII
    character and pair of characters gets the answer unicodedata's categories give."""
    import unicodedata

    def by_category(token):
        return all(unicodedata.category(c).startswith("P") or c == "`" for c in token)

    chars = [chr(n) for n in range(128)]
    for token in chars + [a + b for a in chars for b in chars]:
        assert is_punctuation(token) is (by_category(token) and not token[:1].isalnum()), repr(token)
