"""Auto-compaction and /compact through the real engine and the fake OpenAI server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.context.helpers import chat_requests, runtime, say, session_of
from tests.fakes.openai_server import FakeOpenAI, message_text


async def test_messages_leaving_the_window_are_compacted_progressively(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(
        runtimes, tmp_path, fake_openai, context_compact_dropped_messages=4, context_window="rolling"
    )
    for turn in range(1, 12):
        await say(rt, f"note {turn}")
    session = session_of(rt)
    # 22 rows, the window holds the newest 20: two are out, fewer than four.
    assert rt.context is not None and rt.context.records.latest_summary(session.id) is None
    await say(rt, "note 12")
    first = rt.context.records.latest_summary(session.id)
    assert first is not None and (first.first_seq, first.last_seq) == (1, 4)
    assert first.text.startswith("summary: ")
    await say(rt, "note 13")
    await say(rt, "note 14")
    second = rt.context.records.latest_summary(session.id)
    assert second is not None and (second.first_seq, second.last_seq) == (5, 8)
    update = [r for r in fake_openai.requests if r.is_summary][-1].messages[-1]["content"]
    assert f"Summary so far:\n{first.text}" in update
    assert "#5 Alice (user): note 3" in update and "#8 Ada (assistant, persona ada)" in update
    # The next turn sees the summary and a full window starting right after it.
    await say(rt, "note 15")
    system = chat_requests(fake_openai)[-1]["messages"][0]["content"]
    assert second.text in system
    # The stored history is untouched.
    assert rt.stores.messages.rows_between(session.id, 1, 2)[0].content == "note 1"


async def test_compaction_starts_when_the_history_passes_the_configured_share(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(
        runtimes,
        tmp_path,
        fake_openai,
        model_context_window=2024,  # about 1,200 tokens of budget after the reply and the margin
        context_compact_share=0.5,
        context_keep_recent_messages=2,
        context_compact_dropped_messages=100,
        # The history alone passes the share: no tool schemas take room in this budget.
        tools_enabled="false",
    )
    assert rt.context is not None
    paragraph = "word " * 60
    compacted_at = None
    for turn in range(1, 10):
        await say(rt, f"{turn} {paragraph}")
        session = session_of(rt)
        summary = rt.context.records.latest_summary(session.id)
        if summary is not None:
            compacted_at = turn
            break
        built = await rt.engine.inspect(session)
        budget = built.stats.budget_tokens
        assert budget is not None
        assert built.stats.total_tokens < budget * 0.5  # below the threshold, nothing happened
    assert compacted_at is not None and compacted_at > 1
    rows = rt.stores.messages.recent_rows(session.id, 2)
    assert summary.last_seq == rows[0].seq - 1  # the newest two stay verbatim


async def test_identifiers_survive_a_summary_written_by_the_model(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    def faithful_summary(body: dict[str, Any]) -> str:
        conversation = message_text(body["messages"][-1])
        keep = [word for word in conversation.split() if any(c.isdigit() for c in word) or "/" in word]
        return "Decisions and identifiers: " + " ".join(keep)

    fake_openai.summary = faithful_summary
    rt = runtime(runtimes, tmp_path, fake_openai, context_window="rolling")
    await say(rt, "Deploy build 7.4.1 from https://ci.example.org/jobs/8812 to /srv/chorus/releases")
    await say(rt, "And close ticket OPS-4512 afterwards.")
    answer = await say(rt, "/compact deployment")
    assert answer.startswith("Nothing to compact")  # four messages: all are recent
    for n in range(3):
        await say(rt, f"filler {n}")
    answer = await say(rt, "/compact deployment")
    assert answer.startswith("Compacted messages #1–#4")
    request = [r for r in fake_openai.requests if r.is_summary][-1]
    # The conversation's request first (the persona's system message), the instruction last.
    instruction = request.messages[-1]
    assert instruction["role"] == "user" and "focus on: deployment" in instruction["content"]
    assert "Stay neutral: you are not any of the personas" in instruction["content"]
    assert "#2 Ada (assistant, persona ada)" in instruction["content"]
    assert [m["role"] for m in request.messages].count("system") == 1
    await say(rt, "What was the job link?")
    system = chat_requests(fake_openai)[-1]["messages"][0]["content"]
    for identifier in ("7.4.1", "https://ci.example.org/jobs/8812", "/srv/chorus/releases", "OPS-4512"):
        assert identifier in system


async def test_a_failing_summariser_never_blocks_the_chat(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.summary = lambda body: ""
    rt = runtime(
        runtimes, tmp_path, fake_openai, context_compact_dropped_messages=2, context_window="rolling"
    )
    for turn in range(11):
        assert (await say(rt, f"see https://example.org/{turn}")).startswith("reply to:")
    session = session_of(rt)
    assert rt.context is not None
    summary = rt.context.records.latest_summary(session.id)
    assert summary is not None
    assert summary.text.startswith("[Messages #1–#2 (2 messages) could not be summarised")
    assert "https://example.org/0" in summary.text
    assert rt.context.counters.fallbacks == ["plain statement"]
