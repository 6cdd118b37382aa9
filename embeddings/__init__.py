"""The bundled GloVe 6B 50d word vectors (see README.md here); data only, no code."""
