import pytest

from attncli.tokenize import is_punctuation, tokenize


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


@pytest.mark.parametrize("token,punct", [(",", True), ("--", True), ("...", True), ("'s", False), ("n't", False), ("3.5", False), ("é", False)])
def test_is_punctuation(token, punct):
    assert is_punctuation(token) is punct
