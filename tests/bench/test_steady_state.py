"""The steady-state benchmark: a preloaded conversation, turns and their jobs booked by stage."""

from __future__ import annotations

import pytest

from bench.common import locomo_files
from bench.steady_state import serve_model_and_run, table_group


def test_tables_are_grouped_by_what_they_hold() -> None:
    assert table_group("messages_fts_data") == "full-text index"
    assert table_group("procrastinate_jobs") == table_group("jobs") == "jobs"
    assert table_group("message_embeddings") == "message vectors"


async def test_a_short_run_books_each_turn_and_its_jobs() -> None:
    if not locomo_files():
        pytest.skip("the LoCoMo conversations are not on this machine")
    [result] = await serve_model_and_run(
        [{"turns": 8, "preload": 16, "dense": False, "profile": None, "database_url": None}]
    )
    summary = result["summary"]
    assert summary["turns"] == 8 and summary["earlier turns"] == "16"
    # Each turn streamed one reply. A reply enqueues the jobs that have work: in eight turns
    # the offload's trigger (8 turns) is reached once, and compaction's (8 messages left the
    # window) once: the stepped window drops half of itself in one step, which compaction folds.
    assert result["model calls per turn"]["chat"] == 1.0
    assert result["jobs run per turn"] == {"context.maintain": 0.12, "memory.offload": 0.12}
    assert summary["context.maintain"] > 0 and summary["memory.offload"] > 0
    assert summary["CPU ms/turn"] == pytest.approx(summary["turn"] + summary["after-turn"], abs=0.05)
    # Each turn recalls: its full-text search is booked on its own; dense recall is off.
    assert 0 < summary["full-text search"] < summary["turn"]
    assert summary["encoder (own thread)"] == summary["dense search"] == 0
    assert "messages" in result["disk MB per 1,000 turns"]


async def test_a_group_run_records_the_messages_the_bot_is_not_addressed_in() -> None:
    if not locomo_files():
        pytest.skip("the LoCoMo conversations are not on this machine")
    [result] = await serve_model_and_run(
        [{"turns": 8, "preload": 0, "dense": False, "profile": None, "database_url": None, "group": 4}]
    )
    assert result["summary"]["chat"] == "group, 1 in 4 addressed"
    # Two of the eight messages were addressed: the model answered those alone.
    assert result["model calls per turn"]["chat"] == 0.25
    assert set(result["CPU ms per message, after-turn work included, by kind"]) == {"addressed", "recorded"}
