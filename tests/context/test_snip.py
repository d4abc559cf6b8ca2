"""/snip, /unsnip and /context against the stored transcript and its export."""

from __future__ import annotations

from pathlib import Path

from bot.cli.transfer import export_json
from tests.context.helpers import chat_requests, runtime, say, session_of
from tests.fakes.openai_server import FakeOpenAI


async def test_snip_hides_from_the_model_but_not_from_the_export(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    for n in range(1, 5):
        await say(rt, f"message {n}")
    answer = await say(rt, "/snip 2")
    assert answer.startswith("Snipped messages #7–#8 from the model's context.")
    assert (await say(rt, "/snip 2-3")).startswith("Snipped messages #2–#3")
    session = session_of(rt)

    report = await say(rt, "/context")
    assert "4 in the window (#1, #4–#6)" in report
    assert "Snipped (stored, not sent): #7–#8, #2–#3." in report
    built = await rt.engine.inspect(session)
    assert built.stats.kept_seqs == (1, 4, 5, 6)

    exported = export_json(rt.stores.messages, rt.engine.attachments, session)
    conversation = [m for m in exported["messages"] if m["role"] != "system"]
    assert [m["seq"] for m in conversation] == list(range(1, 9))  # snipped ones included
    assert conversation[6]["content"] == "message 4"

    await say(rt, "next")
    sent = [m["content"] for m in chat_requests(fake_openai)[-1]["messages"][1:]]
    assert sent == ["message 1", "reply to: message 2", "message 3", "reply to: message 3", "next"]

    assert (await say(rt, "/unsnip")) == "Brought back messages #2–#3 into the model's context."
    newest = [row.seq for row in rt.stores.messages.recent_rows(session.id, 2)]
    assert (await rt.engine.inspect(session)).stats.kept_seqs == (1, 2, 3, 4, 5, 6, *newest)
    assert (await say(rt, "/unsnip all")) == "Brought back messages #7–#8 into the model's context."
    assert (await say(rt, "/unsnip")) == "No snipped messages to bring back."


async def test_snip_refuses_what_it_cannot_name(runtimes, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    await say(rt, "hello")
    for args in ("", "abc", "5-3", "1-99"):
        assert (await say(rt, f"/snip {args}")).startswith("Usage: /snip N")
    assert (await say(rt, "/snip #2")) == (
        "Snipped message #2 from the model's context. They stay in the stored transcript "
        "and the export; /unsnip brings them back."
    )
