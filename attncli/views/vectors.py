"""The views of the vectors and their cache: vectors info (and convert, qkv init), list,
verify and clear."""

from __future__ import annotations

import shlex

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.system.limits import size  # as every other size the tool writes: 1.5 kB, not 0.0 MB
from attncli.visible import visible


def info_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """`attncli vectors info` and `convert`: one row a fact."""
    table = Table(show_header=False, box=None)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # a path has no spaces to wrap at: folded, never cut
    for key, value in doc.items():
        # Text, never markup: a path or a source comes from outside
        table.add_row(key if key in SYMBOLS else key.replace("_", " "), Text(visible(_fact(value))))
    return table


SYMBOLS = {"d_k", "d_v"}  # the keys that are the math's own names, shown as the formulas write them


def _fact(value) -> str:
    """A value as a reader says it: yes or no, 100,000, names separated by commas."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(_fact, value))
    return "none" if value is None else str(value)


def entries_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """`attncli vectors list`: a row an entry."""
    if not doc["entries"]:
        return Text(f"no cache entries in {doc['cache_dir']}")

    table = Table(title=Text(f"cache entries in {visible(doc['cache_dir'])}"))
    for name, justify in (("source", "left"), ("words", "right"), ("dim", "right"), ("size", "right"),
                          ("status", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # a path has no spaces to wrap at: never cut
    for e in doc["entries"]:
        # Text, never markup: paths and reasons come from files; a damaged entry may lack any field
        limit = f" (first {e['limit']:,})" if isinstance(e.get("limit"), int) else ""
        source = visible(e["source"]) if isinstance(e.get("source"), str) else visible(e["path"])
        words = f"{e['words']:,}" if isinstance(e.get("words"), int) else "?"
        dim = f"{e['dim']:,}" if isinstance(e.get("dim"), int) else "?"
        status = f"damaged: {visible(e['damaged'])}" if e.get("damaged") else "stale" if e["stale"] else "current"
        table.add_row(Text(f"{source}{limit}"), words, dim, size(e["bytes"]), Text(status))
    return table


def verified_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    """`attncli vectors verify`: a line an entry, its status first, then what to do."""
    lines = []
    for e in doc["entries"]:
        # Text, never markup: names, paths and problems come from files
        line = Text(f"{e['name']} ({e['path']}): ")
        if e["ok"]:
            line.append("ok", style="green")
            lines.append(line)
            continue
        said = {"damaged": "damaged", "unchecked": "not checked", "unreadable": "cannot be read now"}[e["status"]]
        line.append(said, style="bold red" if e["status"] == "damaged" else "yellow")
        line.append(f": {e['problem']}{_again(e)}")
        lines.append(line)
    return Group(*lines)


def _again(e: dict) -> str:
    """What writes an entry that did not verify again."""
    if e["status"] == "unreadable":
        return ""
    if e["source"] == "bundled":
        return "; install attncli again (pip install --force-reinstall attncli)"
    if not isinstance(e["source"], str):
        return "; remove it with `attncli vectors clear`"
    limit = f" --limit {e['limit']}" if isinstance(e["limit"], int) else ""
    return f"; convert it again to get {'them' if e['status'] == 'unchecked' else 'it whole'}: " \
           f"attncli vectors convert {shlex.quote(e['source'])}{limit}"


def cleared_view(doc: dict, *, width: int = 80, color_system: str | None = None) -> RenderableType:
    n = doc["removed"]
    return Text(f"removed {n:,} cache {'entry' if n == 1 else 'entries'} ({size(doc['bytes'])}) "
                f"from {doc['cache_dir']}")
