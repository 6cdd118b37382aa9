"""man/ is generated from the click definitions; fail while it is stale."""

import importlib.util
import re
from pathlib import Path

import manual

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


def test_the_environment_section_is_the_manual_s_table():
    page = (MAN.parent / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    table = page[page.index("<!-- environment -->"):page.index("<!-- /environment -->")]
    names = re.findall(r"^\| `(\w+)` \| .+ \|$", table, flags=re.M)
    assert {"NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "ATTNCLI_VECTORS", "ATTNCLI_CACHE_DIR", "GENSIM_DATA_DIR",
            "PAGER", "ATTNCLI_PAGER", "ATTNCLI_DEBUG"} <= set(names)
    page = load_generator().pages()["attncli.1"]
    section = page[page.index(".SH ENVIRONMENT\n"):]
    assert [m.replace("\\_", "_") for m in re.findall(r"^\\fB(.+)\\fP$", section, flags=re.M)] == names
    # every variable the code reads by name is in the table
    read = set()
    for path in (MAN.parent / "attncli").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        read |= {a or b for a, b in re.findall(r'environ(?:\.get)?[(\[]"([A-Z_]+)"|envvar="([A-Z_]+)"', text)}
    assert read and read <= set(names), read - set(names)


def test_the_tables_of_attncli_1_are_on_one_page_each():
    """EXIT STATUS, ERRORS and ENVIRONMENT are made from those pages, and the catalogue's rows
    run from there: a table on another page would be neither made into the page nor run."""
    holding = {marker: [page for page in manual.pages() if marker in manual.text(page)]
               for marker in ("<!-- errors -->", "<!-- environment -->", "| status | when |")}
    assert holding == {"<!-- errors -->": ["docs/reference/errors.md"],
                       "<!-- environment -->": ["docs/reference/environment.md"],
                       "| status | when |": ["docs/reference/errors.md"]}


def test_no_markdown_is_left_in_the_pages():
    for name, page in load_generator().pages().items():
        assert "`" not in page, name
        assert not re.search(r"\]\(#", page), name


def test_the_manual_s_way_to_read_the_pages_of_a_clone_works():
    """After an editable install no page is installed: the manual's commands read them by path."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("man") is None:
        pytest.skip("no man here")
    page = (MAN.parent / "docs" / "reference" / "shell.md").read_text(encoding="utf-8")
    section = page[page.index("## Man pages"):]
    commands = re.findall(r"^(man \./man/\S+\.1)", section, flags=re.M)
    assert commands == ["man ./man/attncli.1", "man ./man/attncli-scores.1"]
    for command, title in zip(commands, ("ATTNCLI(1)", "ATTNCLI SCORES(1)")):
        shown = subprocess.run(command.split(), cwd=MAN.parent, env={"MANPAGER": "cat", "PATH": "/usr/bin:/bin",
                                                                     "MANWIDTH": "80"},
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.lstrip().startswith(title) and "\nNAME\n" in shown.stdout
