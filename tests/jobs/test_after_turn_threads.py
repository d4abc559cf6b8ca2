"""The after-turn jobs keep the event loop free: no SQL and no CPU-heavy step on the loop's thread.

Memory offload (trigger counts, filters, de-duplication, distillation) and context
maintenance (planning a collapse or a compaction, counting tokens, fitting the
summary) run on the database thread or a worker thread, on SQLite and PostgreSQL,
as a turn's context build does. The steps are watched where the jobs look them up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import bot.context.maintenance
import bot.memory.distill
import bot.memory.offload
from bot.storage.owners import Owner
from tests.context.helpers import say, session_of
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import RuntimeFactory
from tests.support.sql_threads import assert_off_the_loop, sql_threads

CPU_STEPS = {
    bot.memory.offload: (
        "measure",
        "first_chunk",
        "split_tagged",
        "is_duplicate",
        "similarity_tokens",
        "to_new_item",
    ),
    bot.memory.distill: ("parse_model_items", "distill_by_rules"),
    bot.context.maintenance: (
        "plan_collapse",
        "plan_compaction",
        "summary_items",
        "max_chunk_tokens",
        "fit_summary",
        "truncate_to_tokens",
    ),
}


@dataclass
class StepThreads:
    """Which watched steps ran, and which of them ran on the loop's thread."""

    loop_thread: int
    ran: set[str] = field(default_factory=set)
    on_loop: set[str] = field(default_factory=set)

    def watch(self, name: str, step: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            self.ran.add(name)
            if threading.get_ident() == self.loop_thread:
                self.on_loop.add(name)
            return step(*args, **kwargs)

        return watched


async def test_memory_offload_and_context_maintenance_run_off_the_loop(
    database: dict[str, str],
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    runtimes: RuntimeFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        model_max_retries=0,
        # Offload after every turn; collapse and compact early in a small window (the two newest
        # messages alone pass the shares, so folding cannot avoid a compaction).
        memory_turns_threshold=1,
        memory_idle_seconds=0,
        model_context_window=2024,
        context_collapse_share=0.3,
        context_compact_share=0.3,
        context_keep_recent_messages=2,
        context_collapse_range_messages=4,
        # Shares tuned to the history alone: no tool schemas in this small window.
        tools_enabled="false",
        **database,
    )
    steps = StepThreads(loop_thread=threading.get_ident())
    for module, names in CPU_STEPS.items():
        for name in names:
            monkeypatch.setattr(module, name, steps.watch(name, getattr(module, name)))
    paragraph = "I moved to Porto in 2019 and I work at the harbour office near the river. " * 8
    with sql_threads(runtime.database) as seen:
        for turn in range(1, 8):
            await say(runtime, f"{turn}: {paragraph}")
    session = session_of(runtime)
    assert runtime.context is not None and runtime.memory is not None
    assert runtime.context.counters.collapses > 0 and runtime.context.counters.compactions > 0
    assert runtime.memory.store.all_items(Owner.of(session))
    assert steps.ran == {name for names in CPU_STEPS.values() for name in names}
    assert steps.on_loop == set()
    assert_off_the_loop(seen)
