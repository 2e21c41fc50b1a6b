"""Every relative link in the README and docs/ points at a file that exists (a moved or renamed
document breaks this test, not the reader's click)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "DEVELOPERS.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def relative_links(doc: Path) -> list[str]:
    return [t for t in LINK.findall(doc.read_text()) if "://" not in t and not t.startswith("mailto:")]


def test_every_relative_link_resolves():
    broken = [(d.name, t) for d in DOCS if d.exists() for t in relative_links(d) if not (d.parent / t).exists()]
    assert broken == []


def test_the_link_pattern_sees_links():
    assert relative_links(ROOT / "README.md"), "README has no relative link: the pattern is wrong"
