from . import __getattr__  # noqa: F401  (BPE, Unigram, WordPiece: placeholders)
