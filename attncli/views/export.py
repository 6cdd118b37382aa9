"""The pictures of a run's views, --svg and --html: rich's recording of what was drawn, in
templates that name fonts the machine has and load nothing from the network, and the
title a page of them is given.
"""

from __future__ import annotations

import re

from rich.console import Console

from attncli.visible import count, listed


# The pictures (--svg, --html) name fonts a machine has, never a font to download: rich's
# own SVG template loads Fira Code from a CDN. DejaVu Sans Mono (Menlo shares its metrics)
# at 21 px fills rich's 24.4 px lines (its box-drawing glyphs are 1.164 em tall), so
# borders join without gaps; its advance, 0.602 em, is 12.64 px, 0.632 of rich's 20 px cell
# height. Rich clips every line of text to its own line, which would cut the glyphs' ends
# off again: the clip is undone in the style.
FONTS = "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', 'Courier New', monospace"


SVG_FONT_SIZE, SVG_ASPECT = 21, 0.632


SVG_FORMAT = """\
<svg class="rich-terminal" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
    <style>
    .{unique_id}-matrix {{
        font-family: %(fonts)s;
        font-size: %(size)spx;
        line-height: {line_height}px;
        font-variant-east-asian: full-width;
    }}
    .{unique_id}-matrix text {{
        clip-path: none;
    }}
    .{unique_id}-title {{
        font-size: 18px;
        font-weight: bold;
        font-family: sans-serif;
    }}
    {styles}
    </style>
    <defs>
    <clipPath id="{unique_id}-clip-terminal">
      <rect x="0" y="0" width="{terminal_width}" height="{terminal_height}" />
    </clipPath>
    {lines}
    </defs>
    {chrome}
    <g transform="translate({terminal_x}, {terminal_y})" clip-path="url(#{unique_id}-clip-terminal)">
    {backgrounds}
    <g class="{unique_id}-matrix">
    {matrix}
    </g>
    </g>
</svg>
""" % {"fonts": FONTS, "size": SVG_FONT_SIZE}


# rich's recording as the page's table view: its stylesheet, then its code (escaped by rich)
_PARTS = "{stylesheet}\n#table pre.terminal {{ color: {foreground}; background: {background}; }}\0{code}"


# rich writes a run of text with its leading spaces as no-break spaces, which librsvg (and
# so rsvg-convert) drops, drawing the run that many cells to the left: such a run starts
# where its first character is instead
_LEADING_SPACES = re.compile(r'(<text [^>]*?\bx=")([0-9.e+-]+)("[^>]*?\btextLength=")([0-9.e+-]+)("[^>]*>)((?:&#160;)+)')


def svg(console: Console, title: str) -> str:
    """What `console` recorded, as an SVG picture that needs no network and draws the same
    in a browser as in librsvg."""
    picture = console.export_svg(title=title, clear=False, code_format=SVG_FORMAT, font_aspect_ratio=SVG_ASPECT)
    cell = 20 * SVG_ASPECT  # rich's cell width: its 20 px height times the aspect ratio

    def shift(m: re.Match) -> str:
        n = m.group(6).count("&#160;")
        x, length = float(m.group(2)) + n * cell, float(m.group(4)) - n * cell
        return f"{m.group(1)}{x:g}{m.group(3)}{length:g}{m.group(5)}"

    return _LEADING_SPACES.sub(shift, picture)


def html(console: Console, title: str, docs: list[dict]) -> str:
    """The interactive page (views/page.py) of `docs`, called `title`, with what `console`
    recorded as its table view."""
    from attncli.views import page  # its script and style, read from the package: --html's only

    style, code = console.export_html(clear=False, code_format=_PARTS).split("\0", 1)
    return page.page(docs, title, style, code)


def recording(width: int = 100) -> Console:
    """A console that records what is drawn on it for the pictures: in full colour, whatever
    the terminal, and reading no text as markup or emoji codes, as every view is drawn; in a
    notebook too, where rich would show it in the notebook instead (force_jupyter)."""
    import io

    return Console(file=io.StringIO(), width=width, force_terminal=True, force_jupyter=False, color_system="truecolor",
                   no_color=False,
                   record=True, markup=False, emoji=False, highlight=False)


def paint(console: Console, docs: list[dict], draw, view_args: dict) -> None:
    """Draw each of `docs` (their text made visible) on `console` with the view `draw`, a
    rule before each of several (a plain one: each view's first line names its sentence)."""
    for k, doc in enumerate(docs):
        if len(docs) > 1:
            console.rule()
        colours = None if console.no_color else console.color_system  # the view picks its colours for it
        console.print(draw(doc, width=console.width, color_system=colours, **view_args))
        if k < len(docs) - 1:
            console.print()


def picture_title(docs: list[dict]) -> str:
    """What a page of pictures is called: the command and what it ran on, each sentence once,
    "attncli scores: The earth is like an orange (and 2 more sentences)", and the methods of
    a contributions page, a document a method, "attncli contributions: The earth is like an
    orange (methods raw, norm and alti)"."""
    if not docs:
        return "attncli"
    doc = docs[0]
    name = f"attncli {doc.get('command', '')}".strip()
    if doc.get("command") == "compare":
        subject = f"{doc['token']!r} in {count(len(doc['sentences']), 'sentence')}"
    else:
        subject = doc.get("sentence") or doc.get("corpus") or doc.get("name") or doc.get("document")
    if not isinstance(subject, str):
        return name
    said = []
    sentences = dict.fromkeys(d.get("sentence") for d in docs)  # in order, each once
    if len(sentences) > 1:
        said.append(f"and {count(len(sentences) - 1, 'more sentence')}")
    methods = list(dict.fromkeys(d["method"] for d in docs if "method" in d))
    if methods:
        said.append(f"{'method' if len(methods) == 1 else 'methods'} {listed(methods)}")
    return f"{name}: {subject}" + (f" ({'; '.join(said)})" if said else "")
