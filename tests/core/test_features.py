"""Features as bundles: the runtime's commands, built-in tools and jobs are the features' parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.features import features
from bot.runtime import Runtime
from tests.support.runtime import RuntimeFactory


def _parts(runtime: Runtime) -> tuple[list[str], list[str], list[str]]:
    bundles = features(*_services(runtime))
    commands = [command.name for feature in bundles for command in feature.commands]
    tools = [tool.name for feature in bundles for tool in feature.tools]
    jobs = [job.name for feature in bundles for job in feature.jobs]
    return commands, tools, jobs


async def test_the_runtime_holds_exactly_what_its_features_bring(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path)
    commands, tools, jobs = _parts(runtime)

    assert [name for name, _ in runtime.engine.commands.describe()] == commands
    # MCP servers' tools (`server__tool`) come from the servers, not from a feature.
    assert sorted(tool.name for tool in runtime.tools.all() if "__" not in tool.name) == sorted(tools)
    assert list(runtime.jobs.definitions.names) == jobs
    # Each part belongs to one feature only.
    assert (
        len(set(commands)) == len(commands) and len(set(tools)) == len(tools) and len(set(jobs)) == len(jobs)
    )


async def test_a_feature_brings_its_commands_tools_and_jobs_together(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    bundles = {feature.name: feature for feature in features(*_services(runtimes(tmp_path)))}
    memory = bundles["memory"]
    assert {"recall", "memory"} <= {command.name for command in memory.commands}
    assert {tool.name for tool in memory.tools} == {"recall", "remember"}
    assert {job.name for job in memory.jobs} >= {"memory.offload"}
    reminders = bundles["reminders"]
    assert {tool.name for tool in reminders.tools} == {"schedule", "list_schedules", "cancel_schedule"}
    assert [job.name for job in reminders.jobs] == ["reminder.fire"]


async def test_with_memory_off_its_tools_and_jobs_are_not_added(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, memory_enabled=False)
    names = [tool.name for tool in runtime.tools.all()]
    assert "recall" not in names and "remember" not in names
    assert "memory.offload" not in runtime.jobs.definitions.names
    assert "context.maintain" in runtime.jobs.definitions.names


def _services(runtime: Runtime) -> tuple[Any, ...]:
    return (
        runtime.stores.sessions,
        runtime.stores.messages,
        runtime.context,
        runtime.memory,
        runtime.reminders,
    )
