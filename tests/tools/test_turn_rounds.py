"""A turn that calls tools, through the engine and a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bot.runtime import Runtime
from bot.storage.message_append import NewMessage
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools
from bot.turns.events import Delta, Reply, ToolStep, TurnEvent
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.runtime import inbound
from tests.support.tool_rows import left_between_rounds
from transcript import StoredToolCall

DEADLINE = 60.0
INTERJECTION = "meanwhile, a word from elsewhere"


class Word(BaseModel):
    word: str


def add_tools(runtime: Runtime, *tools: FunctionTool[Any]) -> None:
    runtime.tools.add_source(StaticTools(tools))


def echo_tool(calls: list[str]) -> FunctionTool[Word]:
    async def echo(context: ToolContext, arguments: Word) -> object:
        calls.append(arguments.word)
        return {"echo": arguments.word.upper()}

    return FunctionTool("echo", "Say a word back in capitals.", Word, echo, read_only=True)


async def run(runtime: Runtime, text: str) -> tuple[list[TurnEvent], Reply]:
    events: list[TurnEvent] = []
    async with asyncio.timeout(DEADLINE):
        async for event in runtime.engine.stream(inbound(text)):
            events.append(event)
    final = events[-1]
    assert isinstance(final, Reply)
    return events, final


def chat_bodies(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [request.json for request in server.requests if not request.is_summary]


def assert_whole_pairs(messages: list[dict[str, Any]]) -> None:
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        assert message["role"] != "tool", f"a result without its call: {message}"
        answered = []
        while index < len(messages) and messages[index]["role"] == "tool":
            answered.append(messages[index]["tool_call_id"])
            index += 1
        assert answered == [call["id"] for call in message.get("tool_calls", [])]


async def test_parallel_interleaved_calls_are_run_stored_and_sent_back_in_the_api_shape(
    database: dict[str, str], runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    ran: list[str] = []
    fake_openai.script(
        ToolCalls(
            [("echo", {"word": "alpha"}), ("echo", {"word": "beta"})], text="Let me see. ", piece_chars=3
        ),
        "Alpha and beta, in capitals.",
    )
    runtime = runtimes(tmp_path, **database, model_base_url=fake_openai.base_url)
    add_tools(runtime, echo_tool(ran))

    events, reply = await run(runtime, "shout alpha and beta")

    assert sorted(ran) == ["alpha", "beta"]
    steps = [(e.name, e.status, e.summary) for e in events if isinstance(e, ToolStep)]
    assert steps[:2] == [("echo", "started", "alpha"), ("echo", "started", "beta")]
    assert sorted(steps[2:]) == [("echo", "done", "alpha"), ("echo", "done", "beta")]
    assert (reply.kind, reply.status, reply.text) == ("assistant", "complete", "Alpha and beta, in capitals.")
    # The text of the tool round streamed first, then the answer's.
    assert (
        "".join(e.text for e in events if isinstance(e, Delta)) == "Let me see. Alpha and beta, in capitals."
    )
    rows = runtime.stores.messages.messages(reply.session_id or "")
    assert [(m.kind, m.role, m.status) for m in rows] == [
        ("message", "user", "complete"),
        ("tool_call", "assistant", "complete"),
        ("tool_result", "tool", "complete"),
        ("tool_result", "tool", "complete"),
        ("message", "assistant", "complete"),
    ]
    assert rows[1].content == "Let me see. " and rows[1].persona_id == "ada"
    first, second = chat_bodies(fake_openai)
    assert [tool["function"]["name"] for tool in first["tools"]] == sorted(
        tool["function"]["name"] for tool in first["tools"]
    )
    assert "echo" in [tool["function"]["name"] for tool in first["tools"]]
    history = second["messages"][1:]
    assert_whole_pairs(history)
    call_message, *results = history[1:4]
    assert call_message["tool_calls"] == [
        {
            "type": "function",
            "id": "call_0_echo",
            "function": {"name": "echo", "arguments": '{"word": "alpha"}'},
        },
        {
            "type": "function",
            "id": "call_1_echo",
            "function": {"name": "echo", "arguments": '{"word": "beta"}'},
        },
    ]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in results] == [
        ("call_0_echo", {"echo": "ALPHA"}),
        ("call_1_echo", {"echo": "BETA"}),
    ]
    # The next turn sees the whole exchange again, byte for byte.
    fake_openai.script("ok")
    await run(runtime, "thanks")
    assert chat_bodies(fake_openai)[2]["messages"][1:5] == history[:4]


async def test_a_bad_call_is_a_result_the_model_reads_and_the_turn_goes_on(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    ran: list[str] = []
    fake_openai.script(
        ToolCalls([("ehco", {"word": "x"}), ("echo", '{"word": '), ("echo", {"wrd": "y"})]),
        "Sorry, let me try again.",
    )
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    add_tools(runtime, echo_tool(ran))

    events, reply = await run(runtime, "shout something")

    assert ran == []
    assert reply.text == "Sorry, let me try again."
    assert [e.status for e in events if isinstance(e, ToolStep) and e.status != "started"] == ["error"] * 3
    results = [m for m in chat_bodies(fake_openai)[1]["messages"] if m["role"] == "tool"]
    assert results[0]["content"].startswith("Error: There is no tool named 'ehco'")
    assert results[1]["content"].startswith("Error: The arguments are not valid JSON")
    assert "word: Field required" in results[2]["content"]
    stored = [m for m in runtime.stores.messages.messages(reply.session_id or "") if m.kind == "tool_result"]
    assert [m.status for m in stored] == ["failed"] * 3


async def test_after_max_steps_the_model_answers_without_tools_and_says_so(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    ran: list[str] = []
    fake_openai.script(
        *[ToolCalls([("echo", {"word": f"w{step}"})]) for step in range(3)], "Here is what I found."
    )
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, tools_max_steps="3")
    add_tools(runtime, echo_tool(ran))

    _, reply = await run(runtime, "keep shouting")

    assert ran == ["w0", "w1", "w2"]
    assert reply.text == "Here is what I found.\n\n[Stopped using tools after 3 steps.]"
    bodies = chat_bodies(fake_openai)
    assert len(bodies) == 4
    assert [body.get("tool_choice") for body in bodies] == [None, None, None, "none"]
    assert_whole_pairs(bodies[-1]["messages"][1:])


async def test_the_same_call_three_times_ends_the_rounds(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    ran: list[str] = []
    fake_openai.script(
        ToolCalls([("echo", {"word": "same"})]),
        ToolCalls([("echo", '{"word":  "same"}')]),
        ToolCalls([("echo", {"word": "same"})]),
        "I will stop asking.",
    )
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    add_tools(runtime, echo_tool(ran))

    _, reply = await run(runtime, "loop")

    assert ran == ["same"] * 3
    assert reply.text.endswith("[Stopped using tools: the same call was repeated 3 times.]")
    assert chat_bodies(fake_openai)[-1]["tool_choice"] == "none"


async def test_parallel_calls_run_at_once_and_a_slow_one_times_out(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    async def waits(context: ToolContext, arguments: Word) -> object:
        started.append(arguments.word)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()
        if arguments.word == "slow":
            await asyncio.sleep(DEADLINE)
        return "done"

    fake_openai.script(ToolCalls([("wait", {"word": "quick"}), ("wait", {"word": "slow"})]), "One timed out.")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, tools_timeout_seconds="0.5")
    add_tools(runtime, FunctionTool("wait", "Wait.", Word, waits, read_only=True))

    _, reply = await run(runtime, "wait for both")

    assert reply.text == "One timed out."
    results = {
        m["tool_call_id"]: m["content"]
        for m in chat_bodies(fake_openai)[1]["messages"]
        if m["role"] == "tool"
    }
    assert results == {"call_0_wait": "done", "call_1_wait": "Error: wait did not finish within 0.5 seconds."}


async def test_stop_while_a_tool_runs_cancels_it_and_stores_the_turn_whole(
    database: dict[str, str], runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    running = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever(context: ToolContext, arguments: Word) -> object:
        running.set()
        try:
            await asyncio.sleep(DEADLINE)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    fake_openai.script(ToolCalls([("forever", {"word": "x"})], text="Working on it. "), "not used")
    runtime = runtimes(tmp_path, **database, model_base_url=fake_openai.base_url)
    add_tools(runtime, FunctionTool("forever", "Never ends.", Word, forever, read_only=True))
    turn = asyncio.create_task(run(runtime, "do the long thing"))
    async with asyncio.timeout(DEADLINE):
        await running.wait()
    [(chat, _)] = runtime.stores.sessions.list_sessions()

    assert runtime.engine.stop_turn(chat.id)
    _, reply = await turn

    assert cancelled.is_set()
    assert reply.status == "stopped" and reply.text == "[Stopped.]"
    rows = runtime.stores.messages.messages(chat.id)
    assert [(m.kind, m.status) for m in rows] == [
        ("message", "complete"),
        ("tool_call", "complete"),
        ("tool_result", "failed"),
        ("message", "interrupted"),
    ]
    assert rows[2].content == "Stopped before it finished: the turn was stopped."
    assert len(chat_bodies(fake_openai)) == 1


async def test_a_lane_that_stops_listening_mid_tool_leaves_the_turn_whole(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    running = asyncio.Event()

    async def forever(context: ToolContext, arguments: Word) -> object:
        running.set()
        await asyncio.sleep(DEADLINE)
        return "never"

    fake_openai.script(ToolCalls([("forever", {"word": "x"})]))
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    add_tools(runtime, FunctionTool("forever", "Never ends.", Word, forever, read_only=True))
    events = runtime.engine.stream(inbound("do the long thing"))
    async with asyncio.timeout(DEADLINE):
        async for event in events:
            if isinstance(event, ToolStep):
                break
        await running.wait()
        # The lane goes away (a closed tab): the turn's generator is closed mid-tool.
        await events.aclose()
    [(chat, _)] = runtime.stores.sessions.list_sessions()

    rows = runtime.stores.messages.messages(chat.id)
    assert [(m.kind, m.status) for m in rows] == [
        ("message", "complete"),
        ("tool_call", "complete"),
        ("tool_result", "failed"),
        ("message", "interrupted"),
    ]


async def test_a_small_budget_with_many_rounds_never_splits_a_pair_or_loses_the_question(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    ran: list[str] = []
    big = "word " * 400
    fake_openai.script(*[ToolCalls([("echo", {"word": f"{step} {big}"})]) for step in range(6)], "Done.")
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        model_context_window=2400,
        model_reply_reserve_tokens=200,
        tools_result_max_tokens=300,
        memory_enabled="false",
    )
    add_tools(runtime, echo_tool(ran))

    _, reply = await run(runtime, "the question")

    assert reply.text == "Done." and len(ran) == 6
    for body in chat_bodies(fake_openai):
        history = body["messages"][1:]
        assert history[0] == {"role": "user", "content": "the question", "name": "Alice"}
        assert_whole_pairs(history)
    # The last request dropped the turn's oldest exchanges, not its newest.
    results = [m["content"] for m in chat_bodies(fake_openai)[-1]["messages"] if m["role"] == "tool"]
    assert 0 < len(results) < 6
    assert '"echo": "5 WORD' in results[-1]


async def test_a_turn_recovered_between_rounds_runs_only_the_calls_without_a_result(
    database: dict[str, str], runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """A process died after storing one of two results; another finishes the turn from the rows."""
    ran: list[str] = []
    runtime = runtimes(tmp_path, **database, model_base_url=fake_openai.base_url)
    add_tools(runtime, echo_tool(ran))
    stores = runtime.stores
    delivery = left_between_rounds(
        stores,
        lane="web",
        user_id="u1",
        message_id="m1",
        question="shout alpha and beta",
        tool="echo",
        arguments=[{"word": "alpha"}, {"word": "beta"}],
        first_result='{"echo": "ALPHA"}',
    )
    fake_openai.script("ALPHA and BETA.")

    events = [event async for event in runtime.engine.resume(delivery)]

    assert ran == ["beta"]
    reply = events[-1]
    assert isinstance(reply, Reply) and reply.text == "ALPHA and BETA."
    [body] = chat_bodies(fake_openai)
    assert_whole_pairs(body["messages"][1:])
    assert [m["content"] for m in body["messages"] if m["role"] == "tool"] == [
        '{"echo": "ALPHA"}',
        '{"echo": "BETA"}',
    ]
    assert stores.deliveries.state_of(delivery.user_message_id) == "replied"


async def test_each_round_extends_the_last_view_and_sends_what_a_fresh_read_would(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """A round reads only the rows stored since its previous model call; its context must be
    the one a fresh read of every stored row gives — also after a row someone else stored
    mid-turn, and after the model snipped part of the history in the middle of the turn."""
    ran: list[str] = []
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        model_context_window=3500,  # about 2,800 tokens of budget, uncalibrated
        model_reply_reserve_tokens=200,
        memory_enabled="false",
        # No summaries: the scripted answers are the turns' alone, whatever the budget.
        context_compact_dropped_messages=1000,
        context_compact_share=0.99,
        context_collapse_share=0.99,
    )
    session_ids: list[str] = []

    async def echo_and_interject(context: ToolContext, arguments: Word) -> object:
        ran.append(arguments.word)
        session_ids.append(context.session.id)
        if arguments.word == "interject":
            # Another writer stores a row while the turn's tool runs.
            await runtime.engine.db.run(
                runtime.stores.messages.append,
                context.session.id,
                NewMessage(role="user", content=INTERJECTION, token_count=8, sender_name="Alice"),
            )
        return {"echo": arguments.word.upper()}

    add_tools(runtime, FunctionTool("echo", "Say a word back.", Word, echo_and_interject, read_only=True))
    earlier_views: list[int] = []
    original = runtime.engine.assembler.assemble_view

    async def checked(session, persona, view=None, *, tools=None, earlier=None, appended=()):  # type: ignore[no-untyped-def]
        built_view, context = await original(
            session, persona, view, tools=tools, earlier=earlier, appended=appended
        )
        if earlier is not None:
            earlier_views.append(len(built_view.rows))
            fresh = (await original(session, persona, view, tools=tools))[1]
            assert context.messages == fresh.messages
            assert context.stats.total_tokens == fresh.stats.total_tokens
        return built_view, context

    runtime.engine.assembler.assemble_view = checked  # type: ignore[method-assign]
    filler = "history " * 60
    # More earlier turns than the window holds: a read that stops short would show.
    fake_openai.script(*[f"Answer {n}." for n in range(12)])
    for n in range(12):
        _, earlier = await run(runtime, f"earlier question {n} {filler}")
    rows = await runtime.engine.db.run(runtime.stores.messages.recent_rows, earlier.session_id, 100)
    # Most of the window: a fresh read then goes further back, for what the snip hides, than
    # the rows the turn read so far reach.
    first = next(row.seq for row in rows if row.content.startswith("earlier question 5 "))
    last = next(row.seq for row in rows if row.content == "Answer 10.")
    fake_openai.script(
        ToolCalls([("echo", {"word": "one"})]),
        ToolCalls([("echo", {"word": "interject"})]),
        ToolCalls([("snip", {"from_seq": first, "to_seq": last})]),
        ToolCalls([("echo", {"word": "two"}), ("echo", {"word": "three"})]),
        "Done.",
    )

    _, reply = await run(runtime, "the question")

    assert reply.text == "Done." and ran == ["one", "interject", "two", "three"]
    assert len(earlier_views) == 4
    last_request = chat_bodies(fake_openai)[-1]["messages"]
    assert any(m["content"] == INTERJECTION for m in last_request if m["role"] == "user")
    snipped = await runtime.engine.db.run(runtime.engine.assembler.records.snips, session_ids[0])
    assert [(snip.first_seq, snip.last_seq) for snip in snipped] == [(first, last)]
    assert not any(m["content"] == "Answer 10." for m in last_request if m["role"] == "assistant")


async def test_an_appended_row_is_the_row_a_read_gives_back(
    database: dict[str, str], runtimes, tmp_path: Path
) -> None:
    """A tool round extends its view with the rows `append` returned instead of reading
    them again: each must equal, field for field, what reading the row gives."""
    runtime = runtimes(tmp_path, **database)
    stores = runtime.stores
    account = stores.identities.account("web", "u1", "Alice", None)
    session = stores.sessions.private_session(account.person_id, "ada")
    asked = stores.messages.append(
        session.id,
        NewMessage(role="user", content="Wie spät ist es?\x00", token_count=6, sender_name="Al\x07ice"),
    )
    called = stores.messages.append(
        session.id,
        NewMessage(
            role="assistant",
            kind="tool_call",
            content="",
            token_count=9,
            persona_id="ada",
            sender_name="Ada",
            reply_to_id=asked.id,
            tool_calls=(StoredToolCall("c1", "clock", '{"zone": "Europe/Zürich"}'),),
        ),
    )
    answered = stores.messages.append(
        session.id,
        NewMessage(
            role="tool",
            kind="tool_result",
            content="no such zone",
            token_count=3,
            persona_id="ada",
            reply_to_id=asked.id,
            status="failed",
            tool_call_id="c1",
            tool_name="clock",
        ),
    )
    noted = stores.messages.append(
        session.id, NewMessage(role="system", kind="note", content="a note", token_count=0)
    )

    read = stores.messages.rows_after(session.id, 0)
    assert [asked.row, called.row, answered.row] == read
    assert noted.row is None


async def test_a_read_only_call_is_stored_with_its_first_result_and_a_writing_call_before_it_runs(
    database: dict[str, str], runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """A read changes nothing if run again after a crash, so its call row may wait for its
    result (one write a round); a call that changes something is stored before it runs."""
    seen: dict[str, tuple[list[str], int | None]] = {}
    runtime = runtimes(tmp_path, **database, model_base_url=fake_openai.base_url)

    def looking(name: str) -> Any:
        async def look(context: ToolContext, arguments: Word) -> object:
            rows = runtime.stores.messages.messages(context.session.id)
            seen[name] = ([row.kind for row in rows], context.seq)
            return {"seen": len(rows)}

        return look

    add_tools(
        runtime,
        FunctionTool("peek", "Read something.", Word, looking("peek"), read_only=True),
        FunctionTool("note", "Write something down.", Word, looking("note"), read_only=False),
    )
    fake_openai.script(ToolCalls([("peek", {"word": "a"})]), ToolCalls([("note", {"word": "b"})]), "Done.")

    _, reply = await run(runtime, "look, then write")

    assert reply.text == "Done."
    assert seen["peek"] == (["message"], None)
    note_rows, note_seq = seen["note"]
    assert note_rows == ["message", "tool_call", "tool_result", "tool_call"]
    rows = runtime.stores.messages.messages(reply.session_id or "")
    assert [row.kind for row in rows] == [
        "message",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "message",
    ]
    assert note_seq == rows[3].seq
    last_request = chat_bodies(fake_openai)[-1]["messages"]
    assert_whole_pairs(last_request[1:])
