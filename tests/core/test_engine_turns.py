"""The turn engine against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio

from bot.turns.events import Delta, Reply
from tests.fakes.openai_server import (
    Drop,
    Hang,
    Malformed,
    rate_limited,
    server_error,
)
from tests.fakes.openai_server import (
    Reply as Scripted,
)
from tests.support.runtime import inbound


async def collect(engine, message):
    deltas: list[str] = []
    reply = None
    async for event in engine.stream(message):
        if isinstance(event, Delta):
            deltas.append(event.text)
        else:
            assert isinstance(event, Reply)
            reply = event
    return deltas, reply


async def test_reply_streams_and_is_stored_with_the_persona(runtimes, tmp_path, fake_openai):
    fake_openai.script(Scripted("Hello there, Alice!", chunks=["Hello ", "there, ", "Alice!"]))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    deltas, reply = await collect(runtime.engine, inbound("hi"))
    assert deltas == ["Hello ", "there, ", "Alice!"]
    assert reply.kind == "assistant"
    assert reply.text == "Hello there, Alice!"
    assert reply.persona_id == "ada"
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(m.role, m.content, m.persona_id) for m in stored] == [
        ("user", "hi", None),
        ("assistant", "Hello there, Alice!", "ada"),
    ]
    assert stored[1].reply_to_id == stored[0].id
    assert stored[0].token_count == 1
    sent = fake_openai.requests[0].json
    assert sent["stream"] is True
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][-1] == {"role": "user", "content": "hi", "name": "Alice"}


async def test_rate_limit_then_success(runtimes, tmp_path, fake_openai):
    fake_openai.script(rate_limited("0"), "after the wait")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    reply = await runtime.engine.respond(inbound("hello"))
    assert reply.kind == "assistant"
    assert reply.text == "after the wait"
    assert len(fake_openai.requests) == 2


async def test_server_errors_become_a_clear_reply_and_keep_the_message(runtimes, tmp_path, fake_openai):
    fake_openai.script(*[server_error(500)] * 4)
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, model_max_retries="3")
    reply = await runtime.engine.respond(inbound("please remember this"))
    problem = "The model is busy right now (HTTP 500). Try again in a minute."
    assert (reply.kind, reply.text) == ("error", f"{problem} Your message is saved.")
    assert len(fake_openai.requests) == 4
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(m.role, m.kind, m.content) for m in stored] == [
        ("user", "message", "please remember this"),
        ("system", "error", problem),
    ]


async def test_read_timeout_is_reported(runtimes, tmp_path, fake_openai):
    fake_openai.script(Hang(5.0), Hang(5.0))
    runtime = runtimes(
        tmp_path, model_base_url=fake_openai.base_url, model_read_timeout="0.3", model_max_retries="1"
    )
    reply = await runtime.engine.respond(inbound("anyone there?"))
    problem = "The model is unreachable right now (no answer within 0.3 seconds). Try again in a minute."
    assert (reply.kind, reply.text) == ("error", f"{problem} Your message is saved.")
    # Retried once, then the message stays stored with the failure noted after it.
    assert len(fake_openai.requests) == 2
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(m.role, m.kind, m.content) for m in stored] == [
        ("user", "message", "anyone there?"),
        ("system", "error", problem),
    ]


async def test_malformed_stream_is_reported(runtimes, tmp_path, fake_openai):
    fake_openai.script(Malformed("{not json"))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    reply = await runtime.engine.respond(inbound("hi"))
    problem = (
        "The model provider sent a reply Chorus cannot read (unexpected stream data '{not json'). "
        "Try again, or check the provider."
    )
    assert (reply.kind, reply.text) == ("error", f"{problem} Your message is saved.")
    # Another attempt would read the same garbage: no retry.
    assert len(fake_openai.requests) == 1
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(m.role, m.kind, m.content) for m in stored] == [
        ("user", "message", "hi"),
        ("system", "error", problem),
    ]


async def test_interrupted_stream_is_stored_marked_interrupted(runtimes, tmp_path, fake_openai):
    fake_openai.script(Drop("The first half of"))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    reply = await runtime.engine.respond(inbound("tell me a story"))
    assert reply.kind == "assistant"
    assert reply.status == "interrupted"
    assistant = [m for m in runtime.stores.messages.messages(reply.session_id) if m.role == "assistant"]
    assert len(assistant) == 1
    assert assistant[0].status == "interrupted"
    assert assistant[0].content.startswith("The first half of")


async def test_consumer_leaving_mid_stream_keeps_the_partial_reply(runtimes, tmp_path, fake_openai):
    fake_openai.script(Scripted("one two three four", chunks=["one ", "two ", "three ", "four"], delay=0.05))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    stream = runtime.engine.stream(inbound("count"))
    first = await anext(stream)
    await stream.aclose()
    session_id = runtime.stores.sessions.list_sessions()[0][0].id
    # Each piece names the persona writing it and the session, for a lane's Stop control.
    assert first == Delta("one ", "ada", "Ada", session_id=session_id)
    assistant = [m for m in runtime.stores.messages.messages(session_id) if m.role == "assistant"]
    assert [(m.content, m.status) for m in assistant] == [("one ", "interrupted")]


async def test_same_platform_message_twice_gives_one_message_and_one_reply(runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    first = await runtime.engine.respond(inbound("only once", message_id="tg-77"))
    second = await runtime.engine.respond(inbound("only once", message_id="tg-77"))
    assert first.kind == "assistant"
    assert second.kind == "duplicate"
    assert not second.should_send
    stored = runtime.stores.messages.messages(first.session_id)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert len(fake_openai.requests) == 1


async def test_redelivered_message_that_failed_before_is_answered_once(runtimes, tmp_path, fake_openai):
    fake_openai.script(*[server_error(503)] * 2, "now it works")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, model_max_retries="1")
    failed = await runtime.engine.respond(inbound("retry me", message_id="wh-1"))
    assert failed.kind == "error"
    retried = await runtime.engine.respond(inbound("retry me", message_id="wh-1"))
    assert retried.kind == "assistant"
    assert retried.text == "now it works"
    users = [m for m in runtime.stores.messages.messages(failed.session_id) if m.role == "user"]
    assert len(users) == 1


async def test_concurrent_turns_of_one_session_never_interleave(runtimes, tmp_path, fake_openai):
    fake_openai.script(*[Scripted(f"answer {i}", delay=0.02) for i in range(5)])
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    replies = await asyncio.gather(*(runtime.engine.respond(inbound(f"question {i}")) for i in range(5)))
    assert {reply.kind for reply in replies} == {"assistant"}
    stored = runtime.stores.messages.messages(replies[0].session_id)
    assert [m.role for m in stored] == ["user", "assistant"] * 5
    for question, answer in zip(stored[::2], stored[1::2], strict=True):
        assert answer.reply_to_id == question.id
    assert [m.seq for m in stored] == list(range(1, 11))


async def test_different_sessions_run_concurrently(runtimes, tmp_path, fake_openai):
    fake_openai.script(Scripted("slow one", delay=0.3), Scripted("slow two", delay=0.3))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    requests_seen_when_first_finished: list[int] = []

    async def turn(user: str) -> None:
        await runtime.engine.respond(inbound("hi", user_id=user))
        requests_seen_when_first_finished.append(len(fake_openai.requests))

    await asyncio.gather(turn("alice"), turn("bob"))
    # Both requests reached the model before either reply finished.
    assert requests_seen_when_first_finished[0] == 2


async def test_a_redelivered_command_is_run_once(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    first = await runtime.engine.respond(inbound("/persona sage", message_id="cmd-1"))
    again = await runtime.engine.respond(inbound("/persona sage", message_id="cmd-1"))
    assert first.kind == "command" and "Switched to Sage" in first.text
    assert again.kind == "duplicate" and not again.should_send
    events = [(m.kind, m.content) for m in runtime.stores.messages.messages(first.session_id)]
    assert events == [
        ("command", "/persona sage"),
        ("persona_switch", "persona switched from ada to sage"),
        ("command_reply", first.text),
    ]


async def test_a_turn_shown_in_full_leaves_no_delivery_row_and_a_redelivery_is_still_answered_once(
    runtimes, tmp_path
):
    from sqlalchemy import text

    runtime = runtimes(tmp_path)
    message = inbound("hello there", message_id="web-7")
    reply = await runtime.engine.respond(message)
    assert reply.kind == "assistant"

    def states():
        with runtime.database.connect() as connection:
            return connection.execute(text("SELECT state FROM deliveries")).scalars().all()

    assert states() == ["replied"]
    await runtime.engine.delivered(message)
    # Nothing is left to repair: the row goes, so deliveries do not grow with the history.
    assert states() == []
    again = await runtime.engine.respond(inbound("hello there", message_id="web-7"))
    assert again.kind == "duplicate"
    assert [m.role for m in runtime.stores.messages.messages(reply.session_id)] == ["user", "assistant"]
