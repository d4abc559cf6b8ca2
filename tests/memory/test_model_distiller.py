"""The model distiller against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bot.memory.distill import MEMORY_PURPOSE, MODEL_INSTRUCTIONS
from bot.providers.openai import PURPOSE_HEADER
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.fakes.openai_server import FakeOpenAI, echo_reply, server_error
from tests.support.runtime import inbound, make_runtime
from transcript import count_tokens

INSTRUCTIONS_START = MODEL_INSTRUCTIONS.splitlines()[0]


def is_memory_call(body: dict[str, Any]) -> bool:
    messages = body.get("messages", [])
    # The instruction is the request's last message (after the conversation's own request).
    return bool(messages) and str(messages[-1].get("content", "")).startswith(INSTRUCTIONS_START)


def distilled_json(body: dict[str, Any]) -> str:
    """One fact per message line of the excerpt, so the test can see what was sent."""
    excerpt = body["messages"][-1]["content"]
    items = [
        {"kind": "fact", "content": f"seen {seq}", "importance": 4}
        for seq in re.findall(r"^\[(\d+)\]", excerpt, re.M)
    ]
    return "```json\n" + json.dumps({"items": items}) + "\n```"


async def test_a_model_that_fails_then_succeeds_offloads_every_turn_exactly_once(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    failures = {"left": 1}

    def respond(body: dict[str, Any]) -> str:
        if not is_memory_call(body):
            return echo_reply(body)
        return distilled_json(body)

    fake_openai.default = respond
    runtime = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        model_max_retries=0,
        memory_turns_threshold=2,
        memory_idle_seconds=0,
        memory_dedup_threshold=1.0,
    )
    try:
        for n in range(1, 7):
            if n == 2 and failures["left"]:
                # The memory call after turn 2 comes right after its chat reply.
                fake_openai.script(f"reply to: turn {n}", server_error(503))
                failures["left"] = 0
            await runtime.engine.respond(inbound(f"turn {n}"))
            await runtime.engine.drain()
        # Turn 6 alone is below the threshold; the end of the session's activity flushes it.
        session = runtime.stores.sessions.list_sessions()[0][0]
        assert runtime.memory is not None
        await runtime.memory.flush(session)
        memory_calls = [r for r in fake_openai.requests if r.json and is_memory_call(r.json)]
        assert all(r.headers[PURPOSE_HEADER.lower()] == MEMORY_PURPOSE for r in memory_calls)
        sent = [re.findall(r"^\[(\d+)\]", r.json["messages"][-1]["content"], re.M) for r in memory_calls]
        # Turn n stores seqs 2n-1 and 2n. After turn 2 the call fails with 1–4; after turn 3
        # 1–4 are sent again and stored (a chunk is one trigger's worth: two turns) while
        # 5–6 wait below the threshold; 5–8 go after turn 4, 9–12 after turn 6.
        assert sent == [
            ["1", "2", "3", "4"],
            ["1", "2", "3", "4"],
            ["5", "6", "7", "8"],
            ["9", "10", "11", "12"],
        ]
        items = MemoryStore(runtime.database).all_items(Owner.of(session))
        assert [item.content for item in items] == [f"seen {n}" for n in range(1, 13)]
        assert {item.source for item in items} == {"model"}
    finally:
        await runtime.aclose()


async def test_an_unusable_model_answer_falls_back_to_the_rules(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.default = lambda body: "I'd rather not." if is_memory_call(body) else "Noted."
    runtime = make_runtime(
        tmp_path, model_base_url=fake_openai.base_url, memory_turns_threshold=1, memory_idle_seconds=0
    )
    try:
        reply = await runtime.engine.respond(inbound("We decided to use PostgreSQL for billing."))
        await runtime.engine.drain()
        session = runtime.stores.sessions.get_session(reply.session_id or "")
        assert session is not None
        items = MemoryStore(runtime.database).all_items(Owner.of(session))
        assert [(item.kind, item.source, item.content) for item in items] == [
            ("decision", "rules", "Alice: We decided to use PostgreSQL for billing.")
        ]
    finally:
        await runtime.aclose()


async def test_an_excerpt_larger_than_the_models_window_goes_in_calls_that_fit_it(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.default = lambda body: distilled_json(body) if is_memory_call(body) else "Noted."
    runtime = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        model_context_window=1200,
        memory_turns_threshold=4,
        memory_idle_seconds=0,
        memory_dedup_threshold=1.0,
        tools_enabled="false",
    )
    paragraph = "The ferry to the island leaves at seven and the market opens at nine. " * 12
    try:
        for n in range(1, 5):
            await runtime.engine.respond(inbound(f"{n}: {paragraph}"))
            await runtime.engine.drain()
        window = runtime.engine.assembler.windows.info("gpt-4o-mini")
        memory_calls = [r.json for r in fake_openai.requests if r.json and is_memory_call(r.json)]
        assert len(memory_calls) > 1
        for body in memory_calls:
            excerpt_tokens = count_tokens(body["messages"][-1]["content"])
            assert excerpt_tokens + count_tokens(body["messages"][0]["content"]) < window.fitted_window
        sent = [re.findall(r"^\[(\d+)\]", body["messages"][-1]["content"], re.M) for body in memory_calls]
        assert [seq for seqs in sent for seq in seqs] == [str(seq) for seq in range(1, 9)]
    finally:
        await runtime.aclose()


async def test_memory_is_distilled_by_the_conversations_model(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    def respond(body: dict[str, Any]) -> str:
        return distilled_json(body) if is_memory_call(body) else echo_reply(body)

    fake_openai.default = respond
    runtime = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        models=[{"name": "deep", "model": "deep-model"}],
        memory_turns_threshold=2,
        memory_idle_seconds=0,
    )
    try:
        await runtime.engine.respond(inbound("/model deep"))
        for n in range(1, 4):
            await runtime.engine.respond(inbound(f"turn {n}"))
        await runtime.engine.drain()
    finally:
        await runtime.aclose()

    memory_calls = [request.json for request in fake_openai.requests if is_memory_call(request.json)]
    assert {body["model"] for body in memory_calls} == {"deep-model"}
