"""The package boundaries of docs/ARCHITECTURE.md §2, checked on the imports of every module."""

from __future__ import annotations

import ast
import subprocess
import sys
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
    # the runtime holds no platform code (`chorus serve` builds lanes through channels.registry).
    "bot": {"aiogram", "discord", "fastapi"},
}
PLATFORM_LIBRARIES = {"aiogram", "discord", "fastapi", "starlette", "uvicorn"}
# What `bot.config` and every CLI command import of `channels`: the registry, each lane's
# package front and its settings model. A lane's platform library waits until it is built.
LANE_FRONTS = [
    "channels/__init__.py",
    "channels/registry.py",
    "channels/*/__init__.py",
    "channels/*/settings.py",
]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def imported_at_run_time(path: Path) -> set[str]:
    """Imports of a module, minus those only type checkers see (`if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
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


def test_lane_registry_and_settings_import_no_platform_library() -> None:
    fronts = sorted({path for pattern in LANE_FRONTS for path in ROOT.glob(pattern)})
    assert len(fronts) >= 8
    violations = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in fronts
        for module in imported_at_run_time(path)
        if module.split(".")[0] in PLATFORM_LIBRARIES
    ]
    assert violations == []


def test_the_command_line_and_settings_load_no_lane() -> None:
    probe = (
        "import sys, bot.cli, bot.config, bot.runtime\n"
        "bot.config.load_settings(environ={})\n"
        f"print(sorted({{name.split('.')[0] for name in sys.modules}} & set({sorted(PLATFORM_LIBRARIES)!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
