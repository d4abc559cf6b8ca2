"""Failover, /model and /think through the turn engine, on the web and terminal lanes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.metrics import REGISTRY
from bot.runtime import Runtime
from tests.fakes.openai_server import FakeOpenAI, Reply, message_text, overloaded, rate_limited
from tests.support.files import png_image
from tests.support.runtime import RuntimeFactory, attachment, inbound

MODELS = [
    {"name": "smart", "model": "smart-model", "context_window": 64000, "thinking": True},
    {"name": "plain", "model": "plain-model", "tools": False},
]


@pytest.fixture
async def backup() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def failovers(reason: str) -> float:
    return REGISTRY.get_sample_value("chorus_model_failovers_total", {"reason": reason}) or 0.0


def chat_requests(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [request.json for request in server.requests if not request.is_summary]


def runtime_for(runtimes: RuntimeFactory, tmp_path: Path, server: FakeOpenAI, **overrides: Any) -> Runtime:
    return runtimes(tmp_path, model_base_url=server.base_url, models=MODELS, **overrides)


@pytest.mark.parametrize("failure", [overloaded(), rate_limited("0")], ids=["529", "429"])
async def test_a_busy_endpoint_fails_over_and_the_turn_is_answered_once(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI, backup: FakeOpenAI, failure: Any
) -> None:
    fake_openai.script(failure)
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        model_fallbacks=[{"base_url": backup.base_url, "name": "spare-model"}],
    )
    reason = "server_error" if failure.status == 529 else "rate_limited"
    before = failovers(reason)

    events = [event async for event in runtime.engine.stream(inbound("hello"))]

    replies = [event for event in events if type(event).__name__ == "Reply"]
    assert [(reply.kind, reply.text) for reply in replies] == [("assistant", "reply to: hello")]
    assert len(fake_openai.requests) == 1
    assert [body["model"] for body in chat_requests(backup)] == ["spare-model"]
    assert failovers(reason) == before + 1
    assert runtime.stores.messages.last_reply_model(replies[0].session_id or "") == "spare-model"
    status = await runtime.engine.respond(inbound("/status"))
    assert "Last reply by: spare-model (a fallback" in status.text


@pytest.mark.parametrize("lane", ["web", "terminal"])
async def test_model_switches_mid_conversation_with_the_history_intact(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI, lane: str
) -> None:
    runtime = runtime_for(runtimes, tmp_path, fake_openai)
    engine = runtime.engine

    await engine.respond(inbound("my name is Grace", lane=lane))
    listed = await engine.respond(inbound("/model", lane=lane))
    switched = await engine.respond(inbound("/model smart", lane=lane))
    await engine.respond(inbound("what is my name?", lane=lane))
    status = await engine.respond(inbound("/status", lane=lane))
    context = await engine.respond(inbound("/context", lane=lane))
    back = await engine.respond(inbound("/model default", lane=lane))
    await engine.respond(inbound("and now?", lane=lane))

    assert "• smart: smart-model (tools, thinking)" in listed.text
    assert "now speaks with smart (smart-model)" in switched.text
    bodies = chat_requests(fake_openai)
    assert [body["model"] for body in bodies] == ["gpt-4o-mini", "smart-model", "gpt-4o-mini"]
    said = [message_text(message) for message in bodies[1]["messages"]]
    assert any("my name is Grace" in text for text in said)
    assert any("reply to: my name is Grace" in text for text in said)
    assert "Model: smart-model via openai (/model smart)" in status.text
    # The entry's window, less the reply reserve and the margin.
    window = runtime.engine.assembler.windows.info("smart-model")
    assert (window.window, window.source) == (64_000, "configured")
    assert f"of {window.budget_tokens:,} tokens" in status.text
    assert "smart-model (/model smart)" in context.text
    assert back.kind == "command" and "Back to" in back.text
    session = runtime.stores.sessions.get_session(status.session_id or "")
    assert session is not None and session.model_choice is None


async def test_an_unknown_model_is_refused_with_the_list(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtime_for(runtimes, tmp_path, fake_openai)

    refused = await runtime.engine.respond(inbound("/model huge"))

    assert refused.kind == "error"
    assert "There is no model 'huge' here" in refused.text and "• plain: plain-model" in refused.text


async def test_think_is_stored_and_sent_to_models_that_take_it(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtime_for(runtimes, tmp_path, fake_openai)
    engine = runtime.engine

    refused = await engine.respond(inbound("/think high"))
    await engine.respond(inbound("/model smart"))
    accepted = await engine.respond(inbound("/think high"))
    await engine.respond(inbound("think hard"))
    await engine.respond(inbound("/model plain"))
    await engine.respond(inbound("plainly"))

    assert refused.kind == "error" and "takes no thinking level" in refused.text
    assert accepted.kind == "command" and "Thinking is high" in accepted.text
    bodies = chat_requests(fake_openai)
    assert bodies[0]["model"] == "smart-model" and bodies[0]["reasoning_effort"] == "high"
    # A model without thinking is sent no level, and (its entry says so) no tools.
    assert bodies[1]["model"] == "plain-model"
    assert "reasoning_effort" not in bodies[1] and "tools" not in bodies[1]
    session = runtime.stores.sessions.get_session(accepted.session_id or "")
    assert session is not None and session.thinking == "high"


async def test_compaction_summarises_with_the_conversations_model(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtime_for(runtimes, tmp_path, fake_openai)
    engine = runtime.engine
    fake_openai.script(*[Reply(f"answer {n}") for n in range(8)])
    await engine.respond(inbound("/model smart"))
    for n in range(8):
        await engine.respond(inbound(f"message {n}"))

    compacted = await engine.respond(inbound("/compact"))

    assert compacted.kind == "command" and "Compacted" in compacted.text
    summaries = [request.json["model"] for request in fake_openai.requests if request.is_summary]
    assert summaries and set(summaries) == {"smart-model"}


async def test_a_models_vision_flag_decides_whether_images_reach_it(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    models = [*MODELS, {"name": "eyes", "model": "eyes-model", "vision": True}]
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, models=models)
    engine = runtime.engine
    photo = attachment("cat.png", "image/png", png_image(), kind="image")

    await engine.respond(replace(inbound("what is this?"), attachments=(photo,)))
    await engine.respond(inbound("/model eyes"))
    await engine.respond(inbound("and now?"))

    def image_parts(body: dict[str, Any]) -> int:
        return sum(
            1
            for message in body["messages"]
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if part.get("type") == "image_url"
        )

    first, second = chat_requests(fake_openai)
    assert image_parts(first) == 0  # model.vision is false for the persona's model
    assert second["model"] == "eyes-model" and image_parts(second) == 1


@pytest.mark.parametrize("models", [[], MODELS], ids=["no models listed", "models listed"])
async def test_without_a_model_server_model_status_and_context_all_name_the_demo_model(
    runtimes: RuntimeFactory, tmp_path: Path, models: list[dict[str, Any]]
) -> None:
    runtime = runtimes(tmp_path, models=models)
    engine = runtime.engine

    listed = await engine.respond(inbound("/model", lane="terminal"))
    status = await engine.respond(inbound("/status", lane="terminal"))
    context = await engine.respond(inbound("/context", lane="terminal"))
    back = await engine.respond(inbound("/model default", lane="terminal"))

    first_lines = [reply.text.splitlines()[0] for reply in (listed, status, context)]
    assert "This conversation speaks with" in first_lines[0] and "demo" in first_lines[0]
    assert "Model: demo" in status.text and "model demo" in first_lines[2]
    assert back.text == "Back to Ada's model: demo."
    # The configured name is what a model server would be asked for, not what answers here.
    assert not any("gpt-4o-mini" in line for line in first_lines)
    assert "Model: gpt-4o-mini" not in status.text
