"""The coverage floor has one source, `fail_under` in pyproject.toml; the docs quote that number."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def floor() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return int(config["tool"]["coverage"]["report"]["fail_under"])


def quoted_floors() -> list[tuple[str, int]]:
    """Every percentage in a paragraph of the README or the docs that names `fail_under`."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        for paragraph in re.split(r"\n\s*\n", page.read_text(encoding="utf-8")):
            if "fail_under" in paragraph:
                found += [(page.name, int(number)) for number in re.findall(r"(\d+)\s?%", paragraph)]
    return found


def test_the_readme_quotes_the_floor_the_test_command_enforces() -> None:
    quoted = quoted_floors()
    assert ("README.md", floor()) in quoted
    assert [entry for entry in quoted if entry[1] != floor()] == []
