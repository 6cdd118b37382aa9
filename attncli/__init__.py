"""attncli: see self-attention on real text.

Dot-product attention scores, softmax weights and context vectors between the tokens of a
sentence, over pretrained word vectors. The command line is a thin layer over this API:

    from attncli import Options, context_doc, load_vectors, scores_doc

    vectors = load_vectors()  # the bundled GloVe; or a path, or a gensim-data name
    doc = scores_doc("The earth is like an orange", vectors, Options(scale=1.0))
    doc["weights"]  # T x T, each row sums to 1
"""

from attncli.version import __version__  # noqa: E402

from attncli.analyze import Attention, Options, attend, context_doc, scores_doc  # noqa: E402
from attncli.errors import AttncliError, InputError, OptionError, TokenError, VectorsError  # noqa: E402
from attncli.load import load_vectors  # noqa: E402
from attncli.vectors import Vectors  # noqa: E402

__all__ = [
    "Attention", "AttncliError", "InputError", "OptionError", "Options", "Page", "TokenError", "Vectors", "VectorsError",
    "__version__", "attend", "context_doc", "load_vectors", "scores_doc", "show",
]


def __getattr__(name: str):
    """attncli.show and attncli.Page, the notebook's page (notebook.py), imported when first
    asked for: a run of the commands never needs them."""
    if name in ("Page", "show"):
        from attncli import notebook  # its page and iframe: a notebook's, not a command's

        return getattr(notebook, name)
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
