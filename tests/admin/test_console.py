"""What the console shows and changes, through its JSON API with the bearer token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.config import ModelChoiceSettings
from bot.console import Console
from bot.providers.base import ChatRequest, ModelEvent
from bot.providers.openai import OpenAICompatibleProvider
from bot.runtime import Runtime
from bot.storage.owners import Owner
from channels.web.app import create_app
from tests.admin.conftest import BASE_URL
from tests.admin.seed import BEARER, DECISION, DOCUMENT_TEXT, admin_runtime, seed
from tests.fakes.openai_server import Drop, FakeOpenAI
from tests.support.files import png_image
from tests.support.runtime import inbound


async def test_conversation_list_shows_lanes_people_groups_counts_and_personas(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    rows = {row["id"]: row for row in (await client.get("/admin/api/conversations", headers=BEARER)).json()}
    private, group = rows[seeded.private_id], rows[seeded.group_id]
    assert private["lanes"] == ["web"] and private["participants"] == ["Alice (web)"]
    assert private["kind"] == "private" and private["persona_id"] == "sage"
    assert private["message_count"] == len(runtime.stores.messages.messages(seeded.private_id))
    assert group["lanes"] == ["telegram"] and group["kind"] == "group"
    assert group["participants"] == ["telegram -100777"]
    # Latest activity first: the group talked last.
    assert list(rows) == [seeded.group_id, seeded.private_id]


async def test_conversation_search_matches_people_and_message_text(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)

    async def found(query: str) -> list[str]:
        response = await client.get("/admin/api/conversations", params={"q": query}, headers=BEARER)
        return [row["id"] for row in response.json()]

    assert await found("alice") == [seeded.private_id]
    assert await found("what's the plan") == [seeded.group_id]
    assert await found("POSTGRESQL") == [seeded.private_id]
    assert await found("telegram") == [seeded.group_id]
    assert await found("nobody says this") == []


async def test_transcript_shows_every_stored_row_with_records_in_place(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    data = (
        await client.get(f"/admin/api/conversations/{seeded.private_id}/transcript", headers=BEARER)
    ).json()
    entries = data["entries"]
    stored = runtime.stores.messages.messages(seeded.private_id)
    rows = [entry for entry in entries if entry["type"] in ("message", "event")]
    # Every stored row, in order, with its content exactly as stored.
    assert [(row["seq"], row["role"], row["content"]) for row in rows] == [
        (message.seq, message.role, message.content) for message in stored
    ]
    events = [(row["kind"], row["content"]) for row in rows if row["type"] == "event"]
    assert ("command", "/persona sage") in events
    assert ("persona_switch", "persona switched from ada to sage") in events
    replies = [row for row in rows if row["role"] == "assistant"]
    assert [reply["persona_id"] for reply in replies] == ["ada", "ada", "ada", "sage"]
    files = [file for row in rows for file in row["attachments"]]
    assert [(file["kind"], file["filename"], file["has_text"]) for file in files] == [
        ("image", "cat.png", False),
        ("document", "checklist.txt", True),
    ]
    # The snip of the last two messages sits right after the range it covers.
    snip_at = next(index for index, entry in enumerate(entries) if entry["type"] == "snip")
    assert entries[snip_at - 1]["seq"] == entries[snip_at]["last_seq"]
    assert entries[snip_at]["undone_at"] is None
    image, document = files
    picture = await client.get(f"/admin/api/attachments/{image['id']}", headers=BEARER)
    assert picture.headers["content-type"] == "image/png" and picture.content == png_image()
    text = await client.get(f"/admin/api/attachments/{document['id']}/text", headers=BEARER)
    assert text.json() == {"text": DOCUMENT_TEXT}
    assert (await client.get("/admin/api/attachments/99999", headers=BEARER)).status_code == 404
    assert (await client.get("/admin/api/conversations/nope/transcript", headers=BEARER)).status_code == 404


async def test_transcript_shows_compactions_and_collapses_as_records(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    records = runtime.engine.assembler.records
    records.add_collapse(seeded.private_id, 1, 2, "Alice greeted Ada.")
    records.add_summary(seeded.private_id, 1, 5, "Alice shared a cat picture and a checklist.")
    data = (
        await client.get(f"/admin/api/conversations/{seeded.private_id}/transcript", headers=BEARER)
    ).json()
    entries = data["entries"]
    collapse = next(index for index, entry in enumerate(entries) if entry["type"] == "collapse")
    summary = next(index for index, entry in enumerate(entries) if entry["type"] == "compaction")
    assert entries[collapse - 1]["seq"] == 2 and entries[collapse]["content"] == "Alice greeted Ada."
    assert entries[summary - 1]["seq"] == 5 and entries[summary]["first_seq"] == 1


async def test_an_interrupted_reply_is_marked(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "key", max_retries=0)
    runtime = admin_runtime(tmp_path, provider, memory_enabled="false")
    try:
        fake_openai.script(Drop(after_text="The first half of"))
        reply = await runtime.engine.respond(inbound("tell me everything"))
        assert reply.status == "interrupted" and reply.session_id is not None
        data = await Console(runtime).transcript(reply.session_id)
        last = data["entries"][-1]
        assert last["role"] == "assistant" and last["status"] == "interrupted"
        assert last["content"] == "The first half of"
    finally:
        await runtime.aclose()


async def test_switching_persona_stores_the_same_event_as_the_command(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    url = f"/admin/api/conversations/{seeded.private_id}/persona"
    assert (await client.post(url, json={"persona_id": "nobody"}, headers=BEARER)).status_code == 422
    response = await client.post(url, json={"persona_id": "captain"}, headers=BEARER)
    assert response.json() == {"persona_id": "captain"}
    by_command = next(
        m for m in runtime.stores.messages.messages(seeded.private_id) if m.content.startswith("persona ")
    )
    by_console = runtime.stores.messages.messages(seeded.private_id)[-1]
    assert by_console.content == "persona switched from sage to captain"
    assert (by_console.role, by_console.persona_id) == (by_command.role, "captain")
    assert by_console.sender_name == "operator"
    # The next turn speaks as the new persona.
    reply = await runtime.engine.respond(inbound("who is this?", user_id="alice", display_name="Alice"))
    assert reply.persona_id == "captain"


async def test_forgetting_a_memory_item_records_an_event_and_keeps_the_transcript(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    items = (
        await client.get("/admin/api/memory", params={"session": seeded.private_id}, headers=BEARER)
    ).json()
    assert items, "the offload of the seeded conversation stored memory items"
    decision = next(item for item in items if "PostgreSQL" in item["content"])
    assert decision["kind"] in ("decision", "fact", "conclusion", "constraint")
    assert decision["session_id"] == seeded.private_id and decision["source_seq"] is not None
    searched = (await client.get("/admin/api/memory", params={"q": "postgresql"}, headers=BEARER)).json()
    assert [item["id"] for item in searched] == [decision["id"]]
    before = [(m.seq, m.content) for m in runtime.stores.messages.messages(seeded.private_id)]
    response = await client.post(f"/admin/api/memory/{decision['id']}/forget", headers=BEARER)
    assert response.json() == {"forgotten": decision["id"]}
    after = runtime.stores.messages.messages(seeded.private_id)
    assert [(m.seq, m.content) for m in after[: len(before)]] == before
    assert after[-1].role == "system"
    assert (
        after[-1].content == f"memory item #{decision['id']} ({decision['kind']}) forgotten by the operator"
    )
    session = runtime.stores.sessions.get_session(seeded.private_id)
    assert session is not None and runtime.memory is not None
    remaining = [item.id for item in runtime.memory.store.all_items(Owner.of(session))]
    assert decision["id"] not in remaining
    assert (
        await client.post(f"/admin/api/memory/{decision['id']}/forget", headers=BEARER)
    ).status_code == 404
    assert DECISION in [m.content for m in after]


async def test_personas_show_how_often_each_spoke(runtime: Runtime, client: httpx.AsyncClient) -> None:
    await seed(runtime)
    personas = {p["id"]: p for p in (await client.get("/admin/api/personas", headers=BEARER)).json()}
    assert set(personas) == {"ada", "captain", "sage"}
    assert personas["ada"]["default"] and personas["ada"]["replies"] == 5  # three to Alice, two in the group
    assert personas["sage"]["replies"] == 1 and personas["captain"]["replies"] == 0
    assert personas["sage"]["active_sessions"] == 1 and personas["ada"]["active_sessions"] == 1


async def test_health_shows_lanes_model_errors_and_job_queue(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "key", max_retries=0)
    runtime = admin_runtime(tmp_path, provider, memory_enabled="false", channels_discord_token="x")
    try:
        fake_openai.script(Drop(after_text="", clean=True))
        await runtime.engine.respond(inbound("are you there?"))
        # The turn's after-turn work runs on database threads: settled first, so the count holds still.
        await runtime.engine.drain()
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
        ) as http:
            health = (await http.get("/admin/api/health", headers=BEARER)).json()
        lanes = {lane["name"]: lane["state"] for lane in health["lanes"]}
        assert lanes == {"web": "running", "telegram": "off", "discord": "configured"}
        # A lane that reports its state is shown with it, and with the reason it failed.
        runtime.lanes.failed(
            "discord", "Discord closed the gateway with 4014: enable the Message Content Intent."
        )
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
        ) as http:
            reported = (await http.get("/admin/api/health", headers=BEARER)).json()["lanes"]
        discord = next(lane for lane in reported if lane["name"] == "discord")
        assert discord["state"] == "failed" and "4014" in discord["reason"]
        errors = health["model"]["recent_errors"]
        assert [error["kind"] for error in errors] == ["ProviderUnavailable"]
        assert "Try again" in errors[0]["message"] and errors[0]["purpose"] is None
        assert health["jobs"] == {"queued": runtime.engine.pending_jobs}
    finally:
        await runtime.aclose()


async def test_context_shows_parts_against_the_window(runtime: Runtime, client: httpx.AsyncClient) -> None:
    seeded = await seed(runtime)
    data = (await client.get(f"/admin/api/conversations/{seeded.private_id}/context", headers=BEARER)).json()
    session = runtime.stores.sessions.get_session(seeded.private_id)
    assert session is not None
    built = await runtime.engine.inspect(session)
    assert data["total_tokens"] == built.stats.total_tokens
    assert sum(data["parts"].values()) == built.stats.total_tokens
    assert data["budget_tokens"] == built.stats.budget_tokens
    assert data["window_tokens"] == 128_000 and data["parts"]["system prompt"] > 0
    assert data["model_choice"] is None and data["thinking"] is None


async def test_context_names_the_conversations_model_choice(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    runtime.settings.models = [
        ModelChoiceSettings(name="deep", model="deep-model", context_window=32_000, thinking=True)
    ]
    runtime.stores.sessions.set_model_choice(seeded.private_id, "deep")
    runtime.stores.sessions.set_thinking(seeded.private_id, "low")

    data = (await client.get(f"/admin/api/conversations/{seeded.private_id}/context", headers=BEARER)).json()

    assert (data["model"], data["model_choice"], data["thinking"]) == ("deep-model", "deep", "low")
    assert data["window_tokens"] == 32_000


@pytest.mark.parametrize(
    "management",
    [
        {"model_context_window": "1400", "context_collapse_range_messages": "2"},
        {
            "model_context_window": "4000",
            "context_compact_share": "0.95",
            "context_collapse_share": "0.5",
            "context_compact_dropped_messages": "1000",
        },
    ],
    ids=["compaction", "collapse"],
)
async def test_tokens_per_turn_are_those_the_engine_sent(tmp_path: Path, management: dict[str, str]) -> None:
    """The chart's replay of each past turn gives the context the engine built for that turn."""
    runtime = admin_runtime(tmp_path, memory_enabled="false", **management)
    sent: list[int] = []
    stream = runtime.engine.provider.stream

    def remember(request: ChatRequest) -> AsyncIterator[ModelEvent]:
        # The tokens of the context each turn sent (summaries are not streamed).
        sent.append(request.prompt_tokens or 0)
        return stream(request)

    runtime.engine.provider.stream = remember  # type: ignore[method-assign]
    try:
        session_id = ""
        for number in range(14):
            words = " ".join(f"word{number}-{index}" for index in range(40))
            reply = await runtime.engine.respond(inbound(f"message {number}: {words}"))
            session_id = reply.session_id or ""
            await runtime.engine.drain()
        session = runtime.stores.sessions.get_session(session_id)
        assert session is not None
        data = await Console(runtime).context(session_id)
        assert [point["tokens"] for point in data["turns"]] == sent
        # The window was small enough that context management had to act.
        kind = "collapse" if "context_collapse_share" in management else "compaction"
        assert kind in {mark["kind"] for mark in data["marks"]}
    finally:
        await runtime.aclose()


async def test_transcript_shows_each_tool_call_its_arguments_and_its_result(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    # The offline demo model answers "what did I say about …" by calling `recall`.
    await runtime.engine.respond(inbound("my cat is called Miso", user_id="alice"))
    reply = await runtime.engine.respond(inbound("what did I say about my cat?", user_id="alice"))

    data = (
        await client.get(f"/admin/api/conversations/{reply.session_id}/transcript", headers=BEARER)
    ).json()

    entries = [entry for entry in data["entries"] if entry["type"] == "message"]
    call, result = entries[3], entries[4]
    assert call["kind"] == "tool_call" and call["role"] == "assistant"
    [made] = call["tool_calls"]
    assert made["name"] == "recall" and made["arguments"] == '{"query": "my cat"}'
    assert result["kind"] == "tool_result" and result["tool_call_id"] == made["id"]
    assert result["tool_name"] == "recall" and '"query": "my cat"' in result["content"]


async def test_transcript_lists_the_conversations_upcoming_reminders(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    await runtime.engine.respond(inbound("/remind 2030-12-24 09:00 call mum", user_id="alice"))
    await runtime.engine.respond(inbound("/remind every day 08:00 standup", user_id="alice"))
    cancelled = await runtime.engine.respond(inbound("/remind 2030-01-01 10:00 never mind", user_id="alice"))
    [dropped] = [
        reminder
        for reminder in runtime.stores.reminders.of_session(cancelled.session_id, ("scheduled",))
        if reminder.text == "never mind"
    ]
    await runtime.engine.respond(inbound(f"/reminders cancel {dropped.id}", user_id="alice"))
    # Another conversation's reminder stays out of this one's list.
    await runtime.engine.respond(inbound("/remind 2030-06-01 09:00 bob's own", user_id="bob"))

    data = (
        await client.get(f"/admin/api/conversations/{cancelled.session_id}/transcript", headers=BEARER)
    ).json()

    listed = [(item["text"], item["recurrence"], item["state"]) for item in data["reminders"]]
    assert sorted(listed) == [("call mum", None, "scheduled"), ("standup", "0 8 * * *", "scheduled")]


@pytest.mark.parametrize("shape", ["openai", "bare"])
async def test_the_chart_and_last_turn_carry_what_the_server_reused_and_evaluated(
    tmp_path: Path, fake_openai: FakeOpenAI, shape: str
) -> None:
    """Each turn's point carries the prompt tokens the server evaluated; None (unknown) when it
    said nothing of its cache, never 0."""
    fake_openai.usage_shape = shape
    runtime = admin_runtime(tmp_path, model_base_url=fake_openai.base_url, memory_enabled="false")
    try:
        session_id = ""
        for text in ("hi", "how are you?", "and tomorrow?"):
            session_id = (await runtime.engine.respond(inbound(text))).session_id or ""
        data = await Console(runtime).context(session_id)
    finally:
        await runtime.aclose()

    replies = [m for m in runtime.stores.messages.messages(session_id) if m.role == "assistant"]
    assert [point["seq"] for point in data["turns"]] == [m.seq for m in replies]
    if shape == "bare":
        assert [point["evaluated"] for point in data["turns"]] == [None, None, None]
        assert data["last_turn"]["reused"] is None and data["last_turn"]["evaluated"] is None
    else:
        assert [point["evaluated"] for point in data["turns"]] == [
            (m.prompt_tokens or 0) - (m.cached_tokens or 0) for m in replies
        ]
        assert data["turns"][-1]["reused"] == replies[-1].cached_tokens > 0
        assert data["last_turn"]["reused"] == replies[-1].cached_tokens
    assert data["last_turn"]["total"] == replies[-1].prompt_tokens
    assert data["prompt_prefix"] == {"compared": 2, "breaks": {}, "newest_broke": False, "last_break": None}
