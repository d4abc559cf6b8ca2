"""Overflow recovery: collapse the oldest range, rebuild, retry; restart keeps the collapses."""

from __future__ import annotations

from pathlib import Path

from bot.turns.notices import OVERFLOW_MESSAGE
from tests.context.helpers import chat_requests, runtime, say, session_of
from tests.fakes.openai_server import FakeOpenAI, ToolCalls, context_overflow, message_text
from tests.support.runtime import inbound
from tests.tools.test_turn_rounds import add_tools, echo_tool

# Where the summariser's instruction lists the messages to fold.
FOLD_IN = "Conversation to fold in:\n"
QUIET = {"context_compact_dropped_messages": 1000, "context_collapse_range_messages": 4}


async def test_overflow_collapses_the_oldest_range_and_retries(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.summary = lambda body: message_text(body["messages"][-1]).split(FOLD_IN, 1)[1][:300]
    rt = runtime(runtimes, tmp_path, fake_openai, **QUIET)
    for n in range(1, 5):
        await say(rt, f"topic {n}: https://example.org/{n}")
    fake_openai.script(context_overflow(413))
    reply = await say(rt, "and now?")
    assert reply == "reply to: and now?"
    chats = chat_requests(fake_openai)
    rejected, retried = chats[-2]["messages"], chats[-1]["messages"]
    assert len(rejected) == 10  # system + 9 messages
    note = retried[1]["content"]
    assert note.startswith("[Earlier messages #1–#4, folded]\n#1 Alice (user): topic 1")
    assert "https://example.org/1" in note
    assert [m["content"] for m in retried[2:]][-1] == "and now?"
    assert len(retried) == 7  # system, the note, messages #5–#9
    session = session_of(rt)
    assert rt.context is not None and rt.context.counters.overflow_recoveries == 1
    assert len(rt.stores.messages.messages(session.id)) == 10  # nothing deleted: 9 messages and the reply
    await rt.aclose()

    # A new process on the same database sees the same folded range.
    restarted = runtime(runtimes, tmp_path, fake_openai, **QUIET)
    view = restarted.engine.assembler.view(session.id)
    assert [(c.first_seq, c.last_seq) for c in view.collapses] == [(1, 4)]
    await say(restarted, "after restart")
    assert chat_requests(fake_openai)[-1]["messages"][1]["content"] == note


async def test_overflow_that_never_recovers_tells_the_user_and_keeps_the_message(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai, **QUIET)
    for n in range(1, 9):
        await say(rt, f"topic {n}")
    # Every call is rejected, the collapses' summaries too (they fall back to a statement).
    fake_openai.script(*[context_overflow()] * 40)
    reply = await rt.engine.respond(inbound("too big"))
    await rt.engine.drain()
    assert reply.kind == "error" and reply.text == OVERFLOW_MESSAGE
    session = session_of(rt)
    stored = rt.stores.messages.messages(session.id)
    assert [(m.kind, m.content) for m in stored[-2:]] == [
        ("message", "too big"),
        ("error", "context overflow"),
    ]
    chats = [r for r in fake_openai.requests if not r.is_summary]
    assert len(chats) == 8 + 4  # one per earlier turn, then the first try and 3 retries
    assert rt.context is not None and rt.context.counters.collapses == 3
    view = rt.engine.assembler.view(session.id)
    assert [(c.first_seq, c.last_seq) for c in view.collapses] == [(1, 4), (5, 8), (9, 12)]
    assert view.collapses[0].summary.startswith("[Messages #1–#4 (4 messages) could not be summarised")


async def test_background_collapse_folds_the_oldest_range_after_the_turn(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(
        runtimes,
        tmp_path,
        fake_openai,
        model_context_window=2024,
        context_collapse_share=0.3,
        context_compact_share=0.99,
        # The shares are the history's alone: no tool schemas take room in this small budget.
        tools_enabled="false",
        **QUIET,
    )
    paragraph = "word " * 40
    for n in range(1, 6):
        await say(rt, f"{n} {paragraph}")
    session = session_of(rt)
    view = rt.engine.assembler.view(session.id)
    assert view.collapses and view.collapses[0].first_seq == 1
    assert rt.context is not None and rt.context.counters.overflow_recoveries == 0
    # After four turns the six newest messages stay verbatim and #1–#2 were folded.
    assert (view.collapses[0].first_seq, view.collapses[0].last_seq) == (1, 2)
    built = await rt.engine.inspect(session)
    assert built.messages[1]["content"].startswith("[Earlier messages #1–#2, folded]")


async def test_an_overflow_after_a_tool_round_is_retried_on_a_fresh_read(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """A tool round's model call extends the round's view without reading the records again;
    after an overflow it must read them, even when the fold was stored by another process
    (one that raced this one to it), which this process's own record of changes never saw."""
    fake_openai.summary = lambda body: message_text(body["messages"][-1]).split(FOLD_IN, 1)[1][:300]
    rt = runtime(runtimes, tmp_path, fake_openai, **QUIET)
    add_tools(rt, echo_tool([]))
    for n in range(1, 5):
        await say(rt, f"topic {n}: https://example.org/{n}")
    elsewhere = runtime(runtimes, tmp_path, fake_openai, **QUIET)
    assert elsewhere.engine.rounds.overflow_handler is not None
    rt.engine.rounds.overflow_handler = elsewhere.engine.rounds.overflow_handler
    fake_openai.script(ToolCalls([("echo", {"word": "x"})]), context_overflow(413))

    reply = await say(rt, "and now?")

    assert reply == "reply to: and now?"
    rejected, retried = (chat["messages"] for chat in chat_requests(fake_openai)[-2:])
    assert not rejected[1]["content"].startswith("[Earlier messages")
    assert retried[1]["content"].startswith("[Earlier messages #1–#4, folded]")
    assert [m["role"] for m in retried[-3:]] == ["user", "assistant", "tool"]
