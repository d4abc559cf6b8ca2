from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.runtime import Runtime
from tests.fakes.anthropic_server import fake_anthropic_fixture  # noqa: F401
from tests.fakes.openai_server import fake_openai_fixture  # noqa: F401
from tests.fakes.speech_server import fake_speech_fixture  # noqa: F401
from tests.support.peers import MISSING, in_ci
from tests.support.postgres import fresh_database
from tests.support.runtime import RuntimeFactory, make_runtime
from tests.support.teardown import no_pool_tasks_left, within_deadline


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    return fail_missing_peer(report)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report: pytest.CollectReport = yield
    return fail_missing_peer(report)


Report = TypeVar("Report", pytest.TestReport, pytest.CollectReport)


def fail_missing_peer(report: Report) -> Report:
    """Under CI=true, a test (or module) skipped for a missing peer (tests/support/peers.py) fails."""
    if report.skipped and in_ci() and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if reason.startswith(MISSING):
            report.outcome = "failed"
            report.longrepr = f"CI=true and this test cannot run: {reason}"
    return report


@pytest.fixture
async def runtimes(request: pytest.FixtureRequest) -> AsyncIterator[RuntimeFactory]:
    """`make_runtime`, with every runtime built closed when the test ends, pass or fail.

    A closed runtime leaves no database pool task running: one would keep the test's
    event loop from ending, and the suite would hang instead of failing.
    """
    # The test's database is set up first so that it is dropped after these runtimes
    # close, whatever the order of the test's arguments: a database dropped under a
    # running job worker leaves it retrying against nothing until the deadlines pass.
    for database_fixture in ("postgres_url", "database"):
        if database_fixture in request.fixturenames:
            request.getfixturevalue(database_fixture)
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
