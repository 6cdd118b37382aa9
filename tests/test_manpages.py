"""man/ is generated from the click definitions; fail while it is stale."""

import importlib.util
import re
from pathlib import Path

MAN = Path(__file__).resolve().parent.parent / "man"


def load_generator():
    spec = importlib.util.spec_from_file_location("man_generate", MAN / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def undated(page: str) -> str:
    return re.sub(r'^(\.TH "[^"]*" "1") "[^"]*"', r"\1", page, flags=re.M)


def test_man_pages_are_current():
    expected = load_generator().pages()
    committed = {p.name: p.read_text(encoding="utf-8") for p in MAN.glob("*.1")}
    assert sorted(committed) == sorted(expected), "run: python man/generate.py"
    for name, text in expected.items():
        assert undated(committed[name]) == undated(text), f"{name} is stale; run: python man/generate.py"


def test_every_command_has_a_page_with_its_options():
    pages = load_generator().pages()
    assert {"attncli.1", "attncli-scores.1", "attncli-context.1", "attncli-vectors.1", "attncli-vectors-info.1",
            "attncli-vectors-convert.1", "attncli-vectors-list.1", "attncli-vectors-clear.1"} <= set(pages)
    assert r"\fB\-\-top\-k\fP" in pages["attncli-scores.1"]
    assert r"\fB\-\-token\fP" in pages["attncli-context.1"]
    assert all("\x08" not in page for page in pages.values())  # click's no-rewrap marker became .nf
