"""pretty_json, the layout of JSON on a terminal: valid JSON, equal to the one-line form,
a flat container on one line, and no character a terminal would act on."""

import json

from hypothesis import given, strategies as st

from attncli.analyze import to_json
from attncli.cli.output import pretty_json
from attncli.visible import JSON_UNSAFE

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
documents = st.dictionaries(st.text(), st.recursive(scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                                                    max_leaves=20))


@given(documents)
def test_pretty_json_is_the_same_json(doc):
    for ascii_only in (False, True):
        text = pretty_json(doc, ascii_only=ascii_only)
        assert json.loads(text) == json.loads(to_json(doc))
        assert not JSON_UNSAFE.search(text)
        assert not [c for c in text if ord(c) < 32 and c != "\n"]
        assert not ascii_only or text.isascii()


def test_pretty_json_layout():
    doc = {"a": 1, "m": [[1, 2], [3, 4]], "top": [{"token": "x", "weight": 0.5}], "v": {"name": "n", "dim": 2},
           "empty": [], "none": {}}
    assert pretty_json(doc) == """{
  "a": 1,
  "m": [
    [1, 2],
    [3, 4]
  ],
  "top": [
    {"token": "x", "weight": 0.5}
  ],
  "v": {"name": "n", "dim": 2},
  "empty": [],
  "none": {}
}"""
