"""The package boundaries of docs/ARCHITECTURE.md §2, checked on the imports of every module.

Besides which package may import what (the runtime imports no lane: lanes register with it,
and only the command line, the composition root that builds them, imports `channels`): lanes
never reach the database (no `bot.storage` import, no store picked off the
runtime or the engine), and the modules and packages of `bot` import each other without a
cycle, so each layer can be read (and changed) on its own.
"""

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
    "channels": {"sqlmodel", "sqlalchemy", "bot.providers", "bot.storage", "bot.cli"},
    # the runtime holds no platform code, and lanes import it, never the other way: they
    # register with it (`bot.lanes`), and the command line builds them.
    "bot": {"aiogram", "discord", "fastapi", "channels"},
}
# The composition root: the command line (`chorus serve`, `chorus chat`) builds the lanes,
# so it alone of `bot` imports `channels`.
COMPOSITION_ROOT = "bot/cli"
PLATFORM_LIBRARIES = {"aiogram", "discord", "fastapi", "starlette", "uvicorn"}
# What every `chorus` command imports of `channels`: the package, the registry and, once
# settings are read, each lane's package front and settings model. A lane's platform
# library waits until it is built.
LANE_FRONTS = [
    "channels/__init__.py",
    "channels/registry.py",
    "channels/*/__init__.py",
    "channels/*/settings.py",
]


# What a lane would pick the stores or the database off (`runtime.stores`, `engine.stores`,
# `engine.db`): lanes go through the engine or an async service of `bot` instead
# (`bot.visitors`, `bot.history`, `bot.console`), which crosses the database boundary itself.
STORE_ATTRIBUTES = {"store", "stores", "db"}


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
        banned_here = FORBIDDEN[package]
        if path.relative_to(ROOT).as_posix().startswith(COMPOSITION_ROOT + "/"):
            banned_here = banned_here - {"channels"}
        for module in imported_modules(path):
            if any(module == banned or module.startswith(banned + ".") for banned in banned_here):
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


# What `chorus sessions` has no use for: the stores it does not read, the transcript's
# context building, the turn engine, the providers, the migrations' Alembic (at head).
NOT_FOR_LISTING = (
    "alembic",
    "bot.providers",
    "bot.storage.messages",
    "bot.storage.stores",
    "bot.turns",
    "tiktoken",
    "transcript",
)


def test_chorus_sessions_imports_the_tables_it_lists_and_no_store(tmp_path: Path) -> None:
    environ = {
        "PATH": "/usr/bin:/bin",
        "CHORUS_CONFIG": str(tmp_path / "none.yaml"),
        "CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}",
        "CHORUS_DATA_DIR": str(tmp_path / "files"),
    }
    # The first start creates and migrates the database, as an operator's first command would.
    subprocess.run(
        [sys.executable, "-m", "bot.cli", "sessions"], cwd=ROOT, env=environ, check=True, capture_output=True
    )
    probe = (
        "import sys\n"
        "from bot.cli import main\n"
        "main(['sessions'])\n"
        f"print(sorted(name for name in {NOT_FOR_LISTING!r} if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=environ, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == ["No sessions yet.", "[]"]


def test_lanes_never_pick_the_stores_off_the_runtime_or_the_engine() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{node.lineno} uses .{node.attr}"
        for path in sorted((ROOT / "channels").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in STORE_ATTRIBUTES
    ]
    assert violations == []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def bot_import_graph() -> dict[str, set[str]]:
    """Module → the `bot` modules it imports, type-only and function-local imports included:
    a type a module names is as much a dependency as a function it calls."""
    modules = {module_name(path): path for path in (ROOT / "bot").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                # `from bot.storage import migrate` imports the module bot.storage.migrate.
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def package_of(module: str) -> str:
    """`bot.turns.engine` → `bot.turns`; a top-level module (`bot.metrics`) is a package of its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        edges = packages.setdefault(package_of(module), set())
        edges.update(package_of(target) for target in targets if package_of(target) != package_of(module))
    return packages


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_bot_modules_import_each_other_without_a_cycle() -> None:
    assert cycles(bot_import_graph()) == []


def test_bot_packages_import_each_other_without_a_cycle() -> None:
    # E.g. `bot.commands` builds on `bot.turns`, so nothing in `bot.turns` may import `bot.commands`.
    assert cycles(package_graph(bot_import_graph())) == []


def test_the_import_graph_sees_the_imports_that_matter() -> None:
    graph = bot_import_graph()
    # A type-only import counts, and so does a module imported from its package.
    assert "bot.context.maintenance" in graph["bot.commands.registry"]
    assert "bot.storage.migrate" in graph["bot.runtime"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
