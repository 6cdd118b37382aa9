"""The tool's own exception types. The library raises them; only the CLI catches and prints."""


class AttncliError(Exception):
    """Something the user can fix; the message says what was wrong and what to do."""


class VectorsError(AttncliError):
    """The word vectors could not be found or read."""


class InputError(AttncliError):
    """The input text cannot be used: empty, not UTF-8, or without a word that has a vector."""


class TokenError(AttncliError):
    """The token asked for with --token or --index is not (or not uniquely) in the sentence."""
