"""attncli in a notebook: the interactive page of --html as a result that shows itself.

    import attncli
    attncli.show("The earth is like an orange", model="minilm")          # every layer and head
    attncli.show("The earth is like an orange")                          # word vectors: scores
    page = attncli.show("I sat on the bank of the river", model="minilm", view="contributions", method="alti")
    page.save("bank.html")                                               # the page --html writes

A Page displays in Jupyter (`_repr_html_`) as the page inside a sandboxed iframe (its
`srcdoc`, scripts allowed, no origin of its own), as tall as the page: several in one
notebook keep apart, and nothing touches the notebook's own page. `Page(docs)` makes one of any documents the API
gives (scores_doc, heads_doc, ...), `.docs` gives them back.
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path

from attncli.errors import InputError, OptionError
from attncli.visible import visible

# the view each kind of document is drawn with in the table view (views.VIEWS's names)
TABLE_VIEWS = {"scores": "scores_view", "heads": "heads_view", "context": "context_view", "compare": "compare_view",
               "contributions": "contributions_view", "generate": "generate_view"}
SHOWN = ("scores", "heads", "context", "compare", "contributions", "generate")


class Page:
    """The interactive page of some documents (dicts, as the JSON documents are)."""

    def __init__(self, docs: dict | list[dict], title: str | None = None):
        self.docs = [docs] if isinstance(docs, dict) else list(docs)
        if not self.docs or not all(isinstance(d, dict) for d in self.docs):
            raise InputError("a page needs one or more documents (the dicts attncli's functions give)")
        from attncli.views import export  # rich, at the views' top: attncli's import need not pay it

        self.title = visible(title or export.picture_title(self.docs))  # as --html's page is called

    def to_html(self) -> str:
        """The page, a whole HTML document that loads nothing."""
        from attncli import views  # rich, as above
        from attncli.views import export, page  # and the page's
        from attncli.visible import visible_all  # unicodedata, for the text from outside

        shown = visible_all(self.docs)
        view = TABLE_VIEWS.get(shown[0].get("command"))
        if view is None:
            return page.page(shown, self.title)
        console = export.recording(100)
        export.paint(console, shown, views.view(view), {})
        return export.html(console, self.title, shown)  # the page --html writes

    def save(self, path: str | os.PathLike) -> Path:
        """Write the page to `path` (.html or .htm), whole or not at all: a new file, or one
        that is already an attncli page (never another file: an error says so)."""
        path = Path(path)
        if path.suffix.lower() not in (".html", ".htm"):
            raise InputError(f"{path}: a page's file name ends in .html or .htm")
        if path.exists() and not _is_page(path):
            raise InputError(f"{path} exists and is not a page attncli wrote; give a new path")
        from attncli.system.writing import write_whole  # the one writer of --html's pages too

        text = self.to_html().encode("utf-8")
        write_whole(path, lambda f: f.write(text))
        return path

    def _repr_html_(self) -> str:
        """The page in a sandboxed frame, given the page's height (page.frame_height) and at
        least the width it was reckoned at. Nothing outside a frame without an origin of its
        own can measure the page in it; a page that told its height (postMessage) would need
        a script beside the frame to listen and resize it, which Jupyter runs only in a
        notebook it trusts (not one opened from a file until trusted) and a notebook's static
        views never run. A height in the frame's own style needs no script."""
        from html import escape  # only a notebook's display needs it

        from attncli.views import page  # the page's

        html = self.to_html()
        return (f'<iframe sandbox="allow-scripts" title="{escape(self.title, quote=True)}" '
                f'style="width: 100%; min-width: {page.FRAME_WIDTH}px; height: {page.frame_height(html)}px; '
                f'border: 1px solid #ccc" srcdoc="{escape(html, quote=True)}"></iframe>')

    def __repr__(self) -> str:
        return f"<attncli.Page {self.title!r}: {len(self.docs)} document{'s' * (len(self.docs) != 1)}>"


def _is_page(path: Path) -> bool:
    """Whether `path` is an attncli page: its generator named in its first lines, as page.py writes it."""
    try:
        with open(path, "rb") as f:
            head = f.read(200)
    except OSError:
        return False
    return head.startswith(b"<!DOCTYPE html>") and b'<meta name="generator" content="attncli">' in head[:200]


def show(sentence: str | list[str], *, model: str | None = None, vectors=None, view: str | None = None,
         layer: int | None = None, head: int | None = None, token: str | None = None, method: str = "raw",
         options=None, generate: int | None = None) -> Page:
    """The page of one sentence (a list of sentences for view="compare"), as the commands'
    --html draws it. model: a name (minilm), a folder, a model in the Hugging Face cache, a
    GGUF file or a model of ollama's store (llama3.2:1b); else `vectors` (a Vectors, a path,
    or None for the bundled GloVe). view: "heads" (the default with a model: the model view
    and the head view), "scores" (the default over word vectors: the head view and the
    heatmap), "context" and "compare" (with `token`), "contributions" (with `method`), or
    "generate" (the default with generate=N: a decoder writes N pieces after the sentence,
    greedy, each shown with the row of the step that chose it; a `method` of generate's,
    rollout, alti, alti-logit or leave-one-out, attributes them too). layer and head as
    --layer and --head."""
    from attncli.documents.context import compare_doc, context_doc  # as mixing
    from attncli.documents.sentence import heads_doc, scores_doc  # as mixing
    from attncli.encoder import Options  # as mixing
    from attncli.mixing import documents as mixing  # numpy and the math, with the first page
    from attncli.words.load import load_vectors  # the vectors' files and cache

    view = view or ("generate" if generate is not None else "heads" if model else "scores")
    if view not in SHOWN:
        raise OptionError(f"view must be one of {', '.join(map(repr, SHOWN))}, got {view!r}")
    opts = options or Options()
    if model is not None:
        from attncli.models import encoder  # the model's code, and tokenizers within: the model extra's

        source = encoder.load(model, layer=layer, head=head)
    else:
        source = vectors if hasattr(vectors, "vocab") else load_vectors(vectors)
    if view == "generate":
        return Page(_written(sentence, source, generate, method, model))
    if generate is not None:
        raise OptionError(f'generate= writes after the sentence, and view="{view}" shows none of it; leave out view= '
                          'or give view="generate"')
    if view == "compare":
        if isinstance(sentence, str) or token is None:
            raise InputError('view="compare" takes a list of sentences and the token= they share')
        return Page(compare_doc(list(sentence), source, opts, token=token))
    if not isinstance(sentence, str):
        raise InputError(f'view="{view}" takes one sentence, a str')
    if view == "heads":
        doc = heads_doc(sentence, source, opts, layer=layer, head=head)
    elif view == "scores":
        doc = scores_doc(sentence, source, opts)
    elif view == "context":
        if token is None:
            raise InputError('view="context" takes the token= to follow')
        doc = context_doc(sentence, source, opts, token=token)
    else:
        doc = mixing.contributions_doc(sentence, source, opts, method=method, layer=layer, head=head)
    return Page(doc)


def _written(prompt, source, new: int | None, method: str, model: str | None) -> dict:
    """show()'s generate view: the document of `new` greedy pieces after `prompt`."""
    from attncli.documents.generation import METHODS, generate_doc  # as mixing

    if model is None or not isinstance(prompt, str) or not isinstance(new, numbers.Integral) or isinstance(new, bool) \
            or new < 1:
        raise InputError('view="generate" takes one prompt, a str, a model= (a decoder) and generate=N, N >= 1 '
                         "pieces to write")
    if method not in (*METHODS, "raw"):
        raise OptionError(f"method must be one of {', '.join(map(repr, METHODS))} with generate=, got {method!r}")
    if not source.model.causal:
        raise InputError(f"{source.name} is an encoder: it writes nothing; give a decoder as model=")
    return generate_doc(prompt, source, int(new), method=None if method == "raw" else method)
