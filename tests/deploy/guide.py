"""docs/deploy/ read as one guide: the index (its checklist) and every page, each page's title a
`## ` section and its own sections one level below, so a test finds a step by its heading."""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "deploy"


def guide_text() -> str:
    pages = [GUIDE / "README.md", *sorted(p for p in GUIDE.glob("*.md") if p.name != "README.md")]
    parts = [pages[0].read_text()]
    for page in pages[1:]:
        text = re.sub(r"(?m)^(#+) ", lambda m: "#" + m.group(1) + " ", page.read_text())
        parts.append(text)
    return "\n".join(parts)
