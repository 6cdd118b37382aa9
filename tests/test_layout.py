"""How attncli's modules hang together: no module imports, at any depth of the imports of
the modules it imports (in a function or at the top), one that imports it back."""

from __future__ import annotations

import ast
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
                # from attncli import limits names the module attncli.limits; from attncli.x import f, attncli.x
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
    assert "attncli.workers" in graph["attncli.batch"] and "attncli.workers" in graph["attncli.sources"]
    assert "attncli.sources" in graph["attncli.load"]  # an import inside a function counts
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
