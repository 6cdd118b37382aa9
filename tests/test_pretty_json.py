"""pretty_json, the layout of JSON on a terminal: valid JSON, equal to the one-line form,
a flat container on one line, and no character a terminal would act on."""

import json

from hypothesis import given, strategies as st

from attncli.views.json import JSON_UNSAFE, pretty_json, to_json

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


def test_one_line_json_is_the_same_doubles_and_never_nan():
    """to_json writes with orjson where it can: the same values as the standard library's
    JSON, each double read back exactly; NaN refused; a lone surrogate and ASCII-only
    streams still written, by the standard library."""
    import json
    import math

    import numpy as np
    import pytest

    from attncli.views.json import to_json

    rng = np.random.default_rng(0)
    values = (rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, size=2000)).tolist() + [5e-324, 1e308, 0.1]
    doc = {"weights": values, "sentence": "caf\u00e9 \x1b[31m", "head": None}
    line = to_json(doc)
    assert json.loads(line)["weights"] == values  # every double exactly
    assert json.loads(line) == json.loads(json.dumps(doc))
    assert "\x1b" not in line  # escaped as ever
    with pytest.raises(ValueError):
        to_json({"weights": [0.5, math.nan]})
    with pytest.raises(ValueError):
        to_json({"weights": [math.inf]})
    with pytest.raises(ValueError):
        to_json({"scale": math.nan, "head": None})  # a NaN that orjson would write as a key's null
    assert json.loads(to_json({"path": "a\udcffb"})) == {"path": "a\udcffb"}
    assert to_json({"w": "caf\u00e9"}, ascii_only=True) == '{"w":"caf\\u00e9"}'


def test_delete_is_written_as_an_escape_though_it_is_ascii():
    """DEL (0x7f) is an ASCII character a terminal acts on: it is escaped as the others are."""
    assert to_json({"\x7f": "a\x7fb"}) == '{"\\u007f":"a\\u007fb"}'
    assert pretty_json({"\x7f": None}) == '{"\\u007f": null}'
