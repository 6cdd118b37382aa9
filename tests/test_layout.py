"""How attncli's modules hang together: no module imports, at any depth of the imports of
the modules it imports (in a function or at the top), one that imports it back."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "attncli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Each module of attncli: the modules of attncli it imports, anywhere in its text."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up a dot
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                # from attncli.system import limits names the module attncli.system.limits; from attncli.x import f, attncli.x
                found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names}
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports that comes back to where it began, or None."""
    state: dict[str, str] = {}  # "open" while its imports are walked, then "done"
    path: list[str] = []

    def walk(name: str) -> list[str] | None:
        state[name] = "open"
        path.append(name)
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state and (found := walk(other)):
                return found
        path.pop()
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state and (found := walk(name)):
            return found
    return None


def test_the_import_graph_is_read():
    graph = imports()
    assert "attncli.corpus.workers" in graph["attncli.corpus.batch"] and "attncli.corpus.workers" in graph["attncli.words.plaintext"]
    assert "attncli.words.sources" in graph["attncli.words.load"]  # an import inside a function counts
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_itself_through_others():
    assert cycle(imports()) is None


def test_a_plain_install_copies_every_package():
    """pyproject.toml lists its packages by name: one missing is not in a plain install's
    wheel (an editable install, as the tests run, would never show it)."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {module_name(path.parent) for path in PACKAGE.rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)



def reached(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """Every module `start` imports, at any depth, and `start` itself."""
    seen, todo = set(), list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += graph[name]
    return seen


VIEW_MODULES = ["attncli.views", *(f"attncli.views.{name}" for name in (
    "common", "corpus", "drift", "export", "generation", "heatmap", "json", "mixing", "page", "plot", "progress", "sentence", "training",
    "vectors"))]


def test_the_views_import_only_what_a_view_needs():
    """views/ draws documents and writes JSON: it imports nothing of how they are made
    (the documents, the vectors, the models) or of the command line, at any depth."""
    graph = imports()
    views = {name for name in graph if name.split(".")[:2] == ["attncli", "views"]}
    assert views == set(VIEW_MODULES)
    assert reached(graph, views) - views == {"attncli.visible", "attncli.system.limits", "attncli.errors", "attncli.ranking"}


def test_every_view_a_command_names_is_drawn_by_its_module():
    """Each name the commands pass to emit is in views.VIEWS, and its module draws it."""
    from attncli import views

    named = set()
    for path in (PACKAGE / "cli").glob("*.py"):
        named |= set(re.findall(r'"(\w+_view)"', path.read_text(encoding="utf-8")))
    assert named == set(views.VIEWS)
    assert all(views.view(name).__module__ == f"attncli.views.{module}" for name, module in views.VIEWS.items())


def test_importing_the_views_loads_neither_the_documents_nor_the_cli_nor_rich_for_json():
    """In a process of its own: importing every module of views/ adds to what `import attncli`
    loads views/ and the helpers it draws with, never the cli; and the package with its JSON
    writers loads no rich, which a JSON run's start-up need not pay for."""
    code = ("import importlib, json, sys, attncli; before = set(sys.modules); import attncli.views.json; "
            "written = set(sys.modules) - before; "
            f"[importlib.import_module(name) for name in {VIEW_MODULES!r}]; "
            "print(json.dumps([sorted(m for m in written if m.split('.')[0] in ('attncli', 'rich')), "
            "sorted(m for m in set(sys.modules) - before if m.startswith('attncli'))]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    for_json, every = json.loads(done.stdout)
    assert for_json == ["attncli.views", "attncli.views.json"]
    assert set(VIEW_MODULES) <= set(every) and set(every) - set(VIEW_MODULES) <= {"attncli.visible", "attncli.system", "attncli.system.limits",
                                                                                   "attncli.errors", "attncli.ranking"}


def uncommented_imports(text: str) -> list[int]:
    """The lines of imports of attncli's modules made inside a function without a comment (on
    their line or the one above) saying what they put off."""
    lines = text.splitlines()
    found = []
    for function in ast.walk(ast.parse(text)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name == "attncli" or name.startswith("attncli.") for name in names):
                above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                if "#" not in lines[node.lineno - 1] and not above.startswith("#"):
                    found.append(node.lineno)
    return sorted(set(found))


def test_an_import_in_a_function_says_what_it_puts_off():
    sample = ("def f():\n    from attncli import plot  # matplotlib\n    # rich\n    from attncli import render\n"
              "    from attncli.corpus import batch\n    import json\n")
    assert uncommented_imports(sample) == [5]
    where = {str(path.relative_to(PACKAGE.parent)): lines for path in sorted(PACKAGE.rglob("*.py"))
             if (lines := uncommented_imports(path.read_text(encoding="utf-8")))}
    assert where == {}


def command_lengths() -> dict[str, int]:
    """Each command function of attncli/cli (a function a click decorator makes a command): its
    lines, from def to its end, less its docstring's."""
    lengths = {}
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) for d in node.decorator_list):
                first = node.body[0]
                doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                lines = node.end_lineno - node.lineno + 1 - (first.end_lineno - first.lineno + 1 if doc else 0)
                lengths[f"{path.name}:{node.name}"] = lines
    return lengths


def test_a_command_reads_as_parse_load_compute_render_in_under_40_lines():
    lengths = command_lengths()
    assert {"corpus.py:batch", "stats.py:stats", "train.py:train", "scores.py:scores"} <= set(lengths)
    assert len(lengths) >= 18  # every command, vectors' and qkv's among them
    assert {name: n for name, n in lengths.items() if n >= 40} == {}


def test_the_heads_are_split_and_merged_in_attention_py_alone():
    """A model's family hands attention.py its (T, H d_head) arrays, and attention.py splits
    them into heads and merges them again (rotary.py, which turns and shares them before
    Step I, through attention.py's split_heads and merge_heads): no other module merges
    heads, so none holds a second copy of a head's math."""
    calls = {path.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*.py")
             if path.name not in ("attention.py", "rotary.py")
             and re.search(r"\bmerge_heads\(", path.read_text(encoding="utf-8"))}
    assert calls == set()


def test_the_top_level_is_a_map_of_short_modules_and_the_readme_a_front_door():
    """At most a dozen modules beside the subpackages, none past 700 lines, and a README of
    at most 250 lines: the house's limits, held as it grows."""
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    long = {str(path.relative_to(PACKAGE.parent)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 700}
    assert long == {}
    assert len((PACKAGE.parent / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_every_source_of_attention_is_the_whole_encoder():
    """Word vectors (words.vectors.Vectors, over WordEncoder) and a trained model (models.encoder.Trained)
    each give every member the Encoder protocol names, a method where it names a method:
    the rest of the code asks the source, never its kind."""
    import inspect

    from attncli.encoder import Encoder
    from attncli.models.encoder import Trained
    from attncli.words.vectors import Vectors

    methods = {name for name, member in vars(Encoder).items() if inspect.isfunction(member) and not name.startswith("_")}
    fields = set(Encoder.__annotations__)
    assert methods and fields
    for kind in (Vectors, Trained):
        absent = [name for name in methods if not inspect.isfunction(getattr(kind, name, None))]
        assert absent == [], (kind.__name__, absent)
        # a field may be a class attribute, a property, or set on each instance in __init__ or a dataclass's fields
        source = "".join(inspect.getsource(k) for k in kind.__mro__ if k.__module__.startswith("attncli"))
        unset = [name for name in fields if not hasattr(kind, name) and f"self.{name} =" not in source
                 and not re.search(rf"^\s+{name}\s*:", source, flags=re.M)]
        assert unset == [], (kind.__name__, unset)
