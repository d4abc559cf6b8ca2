from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import Runtime
from tests.fakes.openai_server import fake_openai_fixture  # noqa: F401
from tests.support.postgres import fresh_database
from tests.support.runtime import RuntimeFactory, make_runtime
from tests.support.teardown import no_pool_tasks_left, within_deadline


@pytest.fixture
async def runtimes() -> AsyncIterator[RuntimeFactory]:
    """`make_runtime`, with every runtime built closed when the test ends, pass or fail.

    A closed runtime leaves no database pool task running: one would keep the test's
    event loop from ending, and the suite would hang instead of failing.
    """
    built: list[Runtime] = []

    def build(tmp_path: Path, *args: Any, **overrides: Any) -> Runtime:
        runtime = make_runtime(tmp_path, *args, **overrides)
        built.append(runtime)
        return runtime

    yield build
    for runtime in reversed(built):
        await within_deadline(runtime.aclose(), "closing a runtime")
    await no_pool_tasks_left("the runtimes closed")


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, uniquely named database on the test PostgreSQL server (skips without one)."""
    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings overrides of the database to run on: a SQLite file, or a fresh PostgreSQL database.

    Ask for it before `runtimes`, so the database outlives the runtimes built on it.
    """
    if request.param == "sqlite":
        return {}
    return {"database_url": request.getfixturevalue("postgres_url")}
