"""A reasoning model's turn: its thinking is kept beside the reply, never as it, never in history."""

from __future__ import annotations

from bot.metrics import TOKENS
from bot.turns.events import Reply, Thinking, TurnEvent
from tests.fakes.openai_server import Reply as Scripted
from tests.fakes.openai_server import message_text
from tests.support.runtime import inbound


async def events_of(engine, text: str) -> list[TurnEvent]:
    return [event async for event in engine.stream(inbound(text))]


def reply_of(events: list[TurnEvent]) -> Reply:
    last = events[-1]
    assert isinstance(last, Reply)
    return last


async def test_thinking_is_stored_as_its_own_kind_and_never_sent_back(runtimes, tmp_path, fake_openai):
    fake_openai.script(
        Scripted("It is 4.", reasoning="Two and two make four."),
        Scripted("", chunks=["<think>Still four.</think>", "Yes, 4."]),
    )
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    reasoning_before = TOKENS.labels("reasoning")._value.get()

    events = await events_of(runtime.engine, "2+2?")

    reply = reply_of(events)
    assert (reply.text, reply.reasoning) == ("It is 4.", None)
    # The draft hears the model think before its first words.
    assert isinstance(events[0], Thinking)
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(m.role, m.kind, m.content) for m in stored] == [
        ("user", "message", "2+2?"),
        ("system", "reasoning", "Two and two make four."),
        ("assistant", "message", "It is 4."),
    ]
    assert stored[1].token_count > 0 and stored[1].reply_to_id == stored[0].id
    assert TOKENS.labels("reasoning")._value.get() > reasoning_before
    report = reply_of(await events_of(runtime.engine, "/context")).text
    assert f"Thinking: {stored[1].token_count} tokens before the last reply" in report

    second = reply_of(await events_of(runtime.engine, "sure?"))

    assert second.text == "Yes, 4."
    history = [message_text(m) for m in fake_openai.requests[1].messages]
    assert "It is 4." in history
    assert not any("four" in text.lower() for text in history)


async def test_reasoning_on_shows_the_turns_thinking_with_the_reply(runtimes, tmp_path, fake_openai):
    fake_openai.script(Scripted("It is 4.", reasoning="Two and two.", reasoning_field="reasoning"))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)

    answer = reply_of(await events_of(runtime.engine, "/reasoning on"))
    reply = reply_of(await events_of(runtime.engine, "2+2?"))

    assert answer.kind == "command" and "Reasoning is on" in answer.text
    assert (reply.text, reply.reasoning) == ("It is 4.", "Two and two.")
    assert runtime.stores.sessions.shows_reasoning(reply.session_id)
    reply_of(await events_of(runtime.engine, "/reasoning off"))
    assert not runtime.stores.sessions.shows_reasoning(reply.session_id)


async def test_a_think_never_closed_keeps_the_thinking_and_says_the_model_only_thought(
    runtimes, tmp_path, fake_openai
):
    fake_openai.script(Scripted("", chunks=["<think>Let me see", "… and see"]))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)

    reply = reply_of(await events_of(runtime.engine, "2+2?"))

    assert reply.kind == "assistant"
    assert "only thought" in reply.text and "/reasoning on" in reply.text
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(m.role, m.kind, m.content) for m in stored] == [
        ("user", "message", "2+2?"),
        ("system", "reasoning", "Let me see… and see"),
        ("assistant", "message", ""),
    ]
