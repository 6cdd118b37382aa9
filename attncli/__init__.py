"""attncli: see self-attention on real text.

Dot-product attention scores, softmax weights and context vectors between the
tokens of a sentence, over pretrained word vectors.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attncli")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
