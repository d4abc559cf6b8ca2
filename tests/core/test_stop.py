"""Stopping a reply mid-stream: `TurnEngine.stop_turn` and the `/stop` command."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.runtime import Runtime
from bot.turns.events import Delta, Reply
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.support.runtime import inbound

DEADLINE = 60.0


async def start_hanging_turn(
    runtime: Runtime, text: str = "tell me a long story"
) -> tuple[asyncio.Task[Reply], asyncio.Queue[str]]:
    """A turn whose model sends a few words and then nothing; returns it once text arrived."""
    deltas: asyncio.Queue[str] = asyncio.Queue()

    async def run() -> Reply:
        reply: Reply | None = None
        async for event in runtime.engine.stream(inbound(text, user_id="stopper")):
            if isinstance(event, Delta):
                deltas.put_nowait(event.text)
            else:
                reply = event
        assert reply is not None
        return reply

    task = asyncio.create_task(run())
    await asyncio.wait_for(deltas.get(), DEADLINE)
    return task, deltas


async def test_stop_turn_ends_the_stream_and_stores_what_arrived(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Once upon a time"), "Short answer.")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    turn, _ = await start_hanging_turn(runtime)
    [(chat, _count)] = runtime.stores.sessions.list_sessions()
    session = chat.id
    assert runtime.engine.locks.busy(session)  # the running turn holds the session's lock

    assert runtime.engine.stop_turn(session) is True
    reply = await asyncio.wait_for(turn, DEADLINE)

    assert (reply.kind, reply.status) == ("assistant", "stopped")
    assert reply.text.startswith("Once upon a time")
    assert reply.text.endswith("[Stopped.]")
    rows = runtime.stores.messages.messages(session)
    assert [(m.role, m.status) for m in rows] == [("user", "complete"), ("assistant", "interrupted")]
    assert rows[1].content == "Once upon a time"
    assert runtime.engine.stop_turn(session) is False
    assert runtime.engine.locks.busy(session) is False

    # The next turn works normally and sees the stopped reply as history.
    after = await asyncio.wait_for(runtime.engine.respond(inbound("and now?", user_id="stopper")), DEADLINE)
    assert (after.kind, after.status, after.text) == ("assistant", "complete", "Short answer.")
    history = fake_openai.requests[-1].messages
    assert {"role": "assistant", "content": "Once upon a time", "name": "ada"} in [
        {key: message.get(key) for key in ("role", "content", "name")} for message in history
    ]


async def test_stop_command_answers_while_the_turn_holds_the_lock(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Let me think about"))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    turn, _ = await start_hanging_turn(runtime)

    answer = await asyncio.wait_for(runtime.engine.respond(inbound("/stop", user_id="stopper")), DEADLINE)
    reply = await asyncio.wait_for(turn, DEADLINE)

    assert (answer.kind, answer.text) == ("command", "Stopped.")
    assert reply.status == "stopped"
    assert reply.text == "Let me think about\n\n[Stopped.]"
    rows = runtime.stores.messages.messages(reply.session_id or "")
    # The stopped turn and the command's answer are stored in whichever order they finish.
    assert [(m.role, m.kind, m.status, m.content) for m in rows][:2] == [
        ("user", "message", "complete", "tell me a long story"),
        ("system", "command", "complete", "/stop"),
    ]
    assert sorted((m.role, m.kind, m.status, m.content) for m in rows[2:]) == [
        ("assistant", "message", "interrupted", "Let me think about"),
        ("system", "command_reply", "complete", "Stopped."),
    ]


async def test_stop_with_nothing_running(runtimes, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    await runtime.engine.respond(inbound("hello", user_id="idle"))

    answer = await runtime.engine.respond(inbound("/stop", user_id="idle"))

    assert (answer.kind, answer.text) == ("command", "Nothing to stop.")
    assert runtime.engine.stop_turn("no-such-session") is False


async def test_stop_before_the_first_word_stores_an_empty_interrupted_reply(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    turn = asyncio.create_task(runtime.engine.respond(inbound("are you there?", user_id="early")))
    await _wait_until(lambda: len(fake_openai.requests) == 1)

    answer = await asyncio.wait_for(runtime.engine.respond(inbound("/stop", user_id="early")), DEADLINE)
    reply = await asyncio.wait_for(turn, DEADLINE)

    assert answer.text == "Stopped."
    assert (reply.status, reply.text) == ("stopped", "[Stopped.]")
    rows = runtime.stores.messages.messages(reply.session_id or "")
    assert [(m.role, m.status, m.content) for m in rows][-1] == ("assistant", "interrupted", "")


async def _wait_until(condition: object) -> None:
    assert callable(condition)
    async with asyncio.timeout(DEADLINE):
        while not condition():
            await asyncio.sleep(0.02)
