"""The tool's own exception types. The library raises them; only the CLI catches and prints.

And the checks of the library's parameters that raise OptionError.
"""

import math
import numbers


class AttncliError(Exception):
    """Something the user can fix; the message says what was wrong and what to do."""


class VectorsError(AttncliError):
    """The word vectors could not be found or read."""


class InputError(AttncliError):
    """The input text cannot be used: empty, not UTF-8, or without a word that has a vector."""


class TokenError(AttncliError):
    """The token asked for with --token or --index is not (or not uniquely) in the sentence."""


class ModelError(AttncliError):
    """A model that cannot be found, read, or run: the message says which file and what to do."""


class RangeError(ModelError):
    """A model's numbers leave the range of the precision they are computed in (they overflow
    to infinity or NaN, or a square of them does): its weights, though finite, are far
    larger than a trained model's. In float32 a run may compute the same in float64
    (attention.in_range)."""


class WorkerLost(AttncliError):
    """A worker process ended before it answered (killed by the out-of-memory killer, or by
    a person): its share of the work will never come, so the run stops there."""


class OutputError(AttncliError):
    """Something the run writes cannot be written: standard output (a full disk, a closed
    descriptor), or a file it was asked to write (-o, --svg, --html, --png, --export): a
    full disk, no permission, a folder or device in its place. An error (exit status 1),
    not a usage error: the command line was fine, the place to write is not."""


class OptionError(AttncliError, ValueError):
    """A parameter given to the library out of its range or of the wrong kind (an Options field,
    an argument of attncli.attention): the message names the parameter and what it takes."""


def _shown(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def finite(name: str, value) -> float:
    """`value` as a float when it is a finite real number (not a bool); else OptionError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise OptionError(f"{name} must be a finite number, got {_shown(value)}")
    return float(value)


def positive(name: str, value) -> float:
    """`value` as a float when it is a finite real number above 0; else OptionError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise OptionError(f"{name} must be a positive finite number, got {_shown(value)}")
    return float(value)


def whole(name: str, value, least: int = 0) -> int:
    """`value` as an int when it is a whole number (not a bool) of `least` or more; else OptionError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise OptionError(f"{name} must be a whole number of {least} or more, got {_shown(value)}")
    return int(value)
