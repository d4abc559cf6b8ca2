"""The package boundaries of DESIGN §2, checked on the imports of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    # transcript is pure: same history on every lane, no I/O.
    "transcript": {"aiogram", "discord", "fastapi", "sqlmodel", "sqlalchemy", "httpx", "bot", "channels"},
    # persona never knows the lane and does no I/O either.
    "persona": {"aiogram", "discord", "fastapi", "sqlmodel", "sqlalchemy", "httpx", "bot", "channels"},
    # lanes translate; they never reach the database or the model themselves.
    "channels": {"sqlmodel", "sqlalchemy", "bot.providers"},
    # the runtime holds no platform code (serve.py imports lanes lazily, by design).
    "bot": {"aiogram", "discord", "fastapi"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_inside_its_boundary(package: str) -> None:
    violations = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            if any(module == banned or module.startswith(banned + ".") for banned in FORBIDDEN[package]):
                violations.append(f"{path.relative_to(ROOT)} imports {module}")
    assert violations == []
