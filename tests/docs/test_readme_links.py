"""The README's relative links point at files and headings that exist.

`mkdocs build --strict` checks the links between the pages of the documentation site; the README
is not one of them, so this checks that a page moved or renamed under docs/ cannot leave the
newcomer's guide pointing at nothing.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

FENCED_CODE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)[^)]*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
EXPLICIT_ID = re.compile(r"\{\s*#([\w-]+)[^}]*\}$")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading of the README."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading of a docs page."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    slug = github_slug if path == README else mkdocs_slug
    found = set()
    for heading in HEADING.findall(FENCED_CODE.sub("", path.read_text(encoding="utf-8"))):
        explicit = EXPLICIT_ID.search(heading)
        found.add(explicit.group(1) if explicit else slug(heading.replace("`", "")))
    return found


def relative_links(path: Path) -> list[str]:
    text = FENCED_CODE.sub("", path.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text) if not SCHEME.match(target)]


def broken(link: str) -> str | None:
    """Why `link` in the README leads nowhere, or None when it leads somewhere."""
    target, _, anchor = link.partition("#")
    path = (README.parent / target).resolve() if target else README
    if not path.is_file():
        return f"{link}: no file {path.relative_to(REPO) if path.is_relative_to(REPO) else path}"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"{link}: no heading with the anchor #{anchor} in {path.relative_to(REPO)}"
    return None


def test_the_readme_links_into_the_documentation_site():
    assert any(link.startswith("docs/") for link in relative_links(README))


def test_every_relative_link_in_the_readme_leads_to_a_file_and_heading_that_exist():
    assert [reason for link in relative_links(README) if (reason := broken(link))] == []
