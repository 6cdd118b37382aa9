"""The README and the manual in docs/: which pages there are, and what they say."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pages() -> list[str]:
    """The README and every page of docs/, as paths from the clone's root."""
    return ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))]


def text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def flat(page: str) -> str:
    """The page's text on one line, as a sentence reads across its line breaks."""
    return " ".join(text(page).split())


def prose(page_text: str) -> str:
    """The text outside code: no fenced block, no `code` span."""
    return re.sub(r"`[^`\n]+`", "", re.sub(r"^```.*?^```", "", page_text, flags=re.S | re.M))


def anchors(page_text: str) -> set[str]:
    """The #anchors of a page's headings, as GitHub makes them: lower case, punctuation
    dropped, spaces as hyphens, a repeated one numbered from 1."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", page_text, flags=re.S | re.M), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)
