"""attncli: see self-attention on real text.

Dot-product attention scores, softmax weights and context vectors between the tokens of a
sentence, over pretrained word vectors. The command line is a thin layer over this API:

    from attncli import Options, context_doc, load_vectors, scores_doc

    vectors = load_vectors()  # the bundled GloVe; or a path, or a gensim-data name
    doc = scores_doc("The earth is like an orange", vectors, Options(scale=1.0))
    doc["weights"]  # T x T, each row sums to 1
"""

from attncli.version import __version__

__all__ = [
    "Attention", "AttncliError", "InputError", "OptionError", "Options", "Page", "TokenError", "Vectors", "VectorsError",
    "__version__", "attend", "context_doc", "load_vectors", "scores_doc", "show",
]

# each name of the API, by the module that holds it, imported when first asked for: the
# command's entry point (attncli.__main__) is in this package, and holds Ctrl-C before it
# imports numpy and the rest; and a run of the commands never needs Page or show (a notebook's)
_WHERE = {"Attention": "encoder", "Options": "encoder", "attend": "encoder", "context_doc": "documents.context",
          "scores_doc": "documents.sentence", "AttncliError": "errors", "InputError": "errors", "OptionError": "errors",
          "TokenError": "errors", "VectorsError": "errors", "load_vectors": "words.load", "Vectors": "words.vectors",
          "Page": "notebook", "show": "notebook"}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"attncli.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
