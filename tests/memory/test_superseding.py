"""Facts that supersede: a newer item replaces an older one in the snapshot and ranks above it in
recall; the old one stays as history with the day it stopped holding."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.memory.distill import KNOWN_ITEMS_HEADING
from bot.memory.recall import format_hit
from bot.runtime import Runtime
from bot.storage.owners import Owner
from tests.fakes.openai_server import FakeOpenAI, echo_reply
from tests.memory.test_model_distiller import is_memory_call
from tests.support.runtime import inbound, make_runtime

GROUP = {"chat_id": "g5", "chat_kind": "group"}
OWNER = Owner("group", "web:g5")


@pytest.fixture
async def runtime(tmp_path: Path) -> Runtime:
    built = make_runtime(tmp_path, memory_idle_seconds=0)
    yield built
    await built.aclose()


async def said(runtime: Runtime, name: str, text: str, day: datetime) -> None:
    message = inbound(text, user_id=name.lower(), display_name=name, **GROUP)
    await runtime.engine.record(type(message)(**{**message.__dict__, "received_at": day}))


async def flush(runtime: Runtime) -> None:
    await runtime.engine.drain()
    assert runtime.memory is not None
    for session, _ in runtime.stores.sessions.list_sessions():
        await runtime.memory.flush(session)


async def command(runtime: Runtime, text: str, name: str = "Priya") -> str:
    reply = await runtime.engine.respond(inbound(text, user_id=name.lower(), display_name=name, **GROUP))
    return reply.text


async def test_a_move_replaces_where_someone_lives_in_the_snapshot_memory_and_recall(
    runtime: Runtime,
) -> None:
    await said(
        runtime,
        "Priya",
        "I have been living in Leeds for almost five years now.",
        datetime(2022, 3, 4, tzinfo=UTC),
    )
    await said(
        runtime, "Tomas", "I have been living in York since I was a kid.", datetime(2022, 3, 4, tzinfo=UTC)
    )
    await flush(runtime)
    await said(
        runtime, "Priya", "Big news: I moved to Bristol last weekend!", datetime(2022, 8, 28, tzinfo=UTC)
    )
    await flush(runtime)
    assert runtime.memory is not None
    ((session, _),) = runtime.stores.sessions.list_sessions()

    snapshot = runtime.memory.recall.snapshot_only(session).snapshot
    assert "Bristol" in snapshot and "Leeds" not in snapshot
    assert "York" in snapshot  # another person's home is another slot

    items = runtime.stores.memory.all_items(OWNER)
    leeds = next(item for item in items if "Leeds" in item.content)
    bristol = next(item for item in items if "Bristol" in item.content)
    assert leeds.superseded_by == bristol.id and bristol.superseded_by is None
    assert leeds.valid_until is not None and leeds.valid_until.date().isoformat() == "2022-08-28"

    listed = await command(runtime, "/memory")
    assert "Bristol" in listed and "Leeds" not in listed and "1 replaced by newer ones" in listed
    history = await command(runtime, "/memory history")
    assert f"#{leeds.id} [fact] 2022-03-04 until 2022-08-28 (replaced by #{bristol.id})" in history

    hits = runtime.memory.recall.search(OWNER, "Leeds", 5)
    shown = [format_hit(hit) for hit in hits]
    first_bristol = next(n for n, line in enumerate(shown) if "Bristol" in line)
    first_leeds = next(n for n, line in enumerate(shown) if "Leeds" in line)
    # Only the old words matched, yet what holds now comes along, above them.
    assert first_bristol < first_leeds
    assert "no longer holds since 2022-08-28" in shown[first_leeds]


async def test_a_date_that_moved_replaces_the_old_date(runtime: Runtime) -> None:
    await said(runtime, "Anika", "My wedding is on 12 June at the farm.", datetime(2023, 1, 5, tzinfo=UTC))
    await flush(runtime)
    await said(
        runtime,
        "Priya",
        "Update: we decided the wedding has been moved to 19 June.",
        datetime(2023, 2, 1, tzinfo=UTC),
    )
    await flush(runtime)
    assert runtime.memory is not None
    ((session, _),) = runtime.stores.sessions.list_sessions()
    snapshot = runtime.memory.recall.snapshot_only(session).snapshot
    assert "19 June" in snapshot and "12 June" not in snapshot


async def test_the_same_fact_said_twice_replaces_nothing(runtime: Runtime) -> None:
    await said(
        runtime,
        "Priya",
        "I have been living in Leeds for almost five years now.",
        datetime(2022, 3, 4, tzinfo=UTC),
    )
    await flush(runtime)
    await said(runtime, "Priya", "We moved to Leeds ages ago, it is home.", datetime(2022, 5, 4, tzinfo=UTC))
    await flush(runtime)
    assert all(item.superseded_by is None for item in runtime.stores.memory.all_items(OWNER))


def offered_ids(body: dict[str, Any]) -> list[int]:
    excerpt = str(body["messages"][-1]["content"])
    if KNOWN_ITEMS_HEADING not in excerpt:
        return []
    return [int(n) for n in re.findall(r"^#(\d+) ", excerpt.split(KNOWN_ITEMS_HEADING, 1)[1], re.M)]


async def test_the_model_names_the_item_a_new_one_replaces_in_the_same_call(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    memory_calls: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> str:
        if not is_memory_call(body):
            return echo_reply(body)
        memory_calls.append(body)
        excerpt = str(body["messages"][-1]["content"])
        if "Porto" in excerpt:
            item = {"content": "Ines lives in Porto.", "replaces": offered_ids(body), "seqs": [2, 2]}
        else:
            item = {"content": "Ines lives in Lisbon.", "replaces": [999], "seqs": [1, 1]}
        entry = {"kind": "fact", "importance": 6, "about": "Ines", "said_by": "Ines", **item}
        return json.dumps({"items": [entry]})

    fake_openai.default = respond
    runtime = make_runtime(tmp_path, model_base_url=fake_openai.base_url, memory_idle_seconds=0)
    try:
        await said(
            runtime,
            "Ines",
            "Lisbon has been my home for years, I love it here.",
            datetime(2023, 1, 5, tzinfo=UTC),
        )
        await flush(runtime)
        await said(
            runtime,
            "Ines",
            "We packed everything up and went north to Porto in May.",
            datetime(2023, 6, 1, tzinfo=UTC),
        )
        await flush(runtime)
        ((session, _),) = runtime.stores.sessions.list_sessions()
        assert runtime.memory is not None
        snapshot = runtime.memory.recall.snapshot_only(session).snapshot
        items = runtime.stores.memory.all_items(OWNER)
    finally:
        await runtime.aclose()

    lisbon, porto = items
    # One call per offload: the item it replaces was offered in the same request.
    assert len(memory_calls) == 2 and offered_ids(memory_calls[1]) == [lisbon.id]
    assert lisbon.superseded_by == porto.id and porto.superseded_by is None
    assert "Porto" in snapshot and "Lisbon" not in snapshot
    assert porto.about == "Ines" and porto.said_by_name == "Ines" and porto.said_by is not None
    assert (porto.source_seq, porto.source_last_seq) == (2, 2)
