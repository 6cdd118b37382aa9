"""Word vectors: their files, formats, cache and lookups, text to tokens, and attention over them."""
