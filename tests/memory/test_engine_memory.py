"""Memory through the engine: snapshot and recall in the context, scope, commands, CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main as chorus
from bot.runtime import Runtime
from tests.support.runtime import inbound, make_runtime

GROUP = {"chat_id": "g1", "chat_kind": "group", "was_mentioned": True}


@pytest.fixture
async def runtime(tmp_path: Path) -> Runtime:
    built = make_runtime(tmp_path, memory_turns_threshold=1, memory_idle_seconds=0)
    yield built
    await built.aclose()


async def say(runtime: Runtime, text: str, **where: object) -> str:
    reply = await runtime.engine.respond(inbound(text, **where))  # type: ignore[arg-type]
    await runtime.engine.drain()
    return reply.text


async def system_text(runtime: Runtime, **where: object) -> str:
    reply = await runtime.engine.respond(inbound("/status", **where))  # type: ignore[arg-type]
    session = runtime.stores.sessions.get_session(reply.session_id or "")
    assert session is not None
    context = await runtime.engine.inspect(session)
    # The system message, then the turn's note (recall), which follows the newest user message.
    users = [message for message in context.messages if message["role"] == "user"]
    return "\n\n".join(str(message["content"]) for message in (context.messages[0], *users[-1:]))


async def test_the_snapshot_of_the_newest_items_is_in_the_next_turns_preamble(runtime: Runtime) -> None:
    await say(runtime, "We decided to use PostgreSQL for billing.")
    await say(runtime, "You must never deploy on Fridays.")
    preamble = await system_text(runtime)
    # Stored since the window's last step (here: since the conversation began), the items
    # follow the history until the window's next step takes them into the system message.
    assert (
        "## Long-term memory, newly stored\n- [constraint] Alice: You must never deploy on Fridays.\n"
        in preamble
    )
    assert "- [decision] Alice: We decided to use PostgreSQL for billing." in preamble


async def test_private_memory_never_reaches_a_group_and_the_reverse(runtime: Runtime) -> None:
    await say(runtime, "My secret project is called Bluebird and I started it in May.")
    await say(runtime, "We decided the group picnic is on Sunday at the lake.", **GROUP, user_id="u2")
    private = await system_text(runtime)
    group = await system_text(runtime, **GROUP)
    assert "Bluebird" in private and "picnic" not in private
    assert "picnic" in group and "Bluebird" not in group
    assert (await say(runtime, "/recall Bluebird project", **GROUP)).startswith("Nothing found")
    assert "Nothing found" in await say(runtime, "/recall picnic lake")
    assert "Nothing remembered yet" not in await say(runtime, "/memory", **GROUP)


async def test_recall_adds_relevant_older_items_to_the_turn(runtime: Runtime) -> None:
    await say(runtime, "We decided to name the cat Miso after the soup.")
    for n in range(4):
        await say(runtime, f"You must always water plant number {n} on Mondays.")
    preamble = await system_text(runtime)
    assert "Miso" not in preamble.split("## Recalled from earlier")[0]  # not among the newest three
    await runtime.engine.respond(inbound("What was the name of the cat again?"))
    await runtime.engine.drain()
    preamble = await system_text(runtime)
    recalled = preamble.split("## Recalled from earlier\n")[1]
    assert recalled.startswith("- [decision #1, ")
    assert "Alice: We decided to name the cat Miso after the soup." in recalled.splitlines()[0]


async def test_recall_ranks_the_most_relevant_first(runtime: Runtime) -> None:
    await say(runtime, "We decided the blue database server hosts billing.")
    await say(runtime, "We decided to paint the office blue.")
    await say(runtime, "It turns out the database server ran out of disk.")
    answer = await say(runtime, "/recall database server disk")
    first = answer.splitlines()[0]
    assert first.startswith("1. [user message #5, ") and "ran out of disk" in first
    assert "paint the office" not in answer.splitlines()[1]


async def test_memory_list_forget_and_export(runtime: Runtime) -> None:
    await say(runtime, "We decided to use PostgreSQL for billing.")
    listing = await say(runtime, "/memory")
    assert (
        listing.splitlines()[0]
        == "1 remembered item (1 written, 0 merged, 0 duplicates skipped). Newest first:"
    )
    line = listing.splitlines()[1]
    assert line.startswith("#1 [decision] 20") and line.endswith(
        "— Alice: We decided to use PostgreSQL for billing."
    )
    exported = await say(runtime, "/memory export")
    records = json.loads(exported.removeprefix("```json\n").removesuffix("\n```"))
    assert [(r["id"], r["kind"], r["content"]) for r in records] == [
        (1, "decision", "Alice: We decided to use PostgreSQL for billing.")
    ]
    assert await say(runtime, "/forget 1", **GROUP) == "There is no remembered item #1 here (see /memory)."
    assert await say(runtime, "/forget 1") == "Forgot item #1."
    assert (await say(runtime, "/memory")).startswith("Nothing remembered yet.")
    assert "Forgot" not in await say(runtime, "/forget one")


def test_chorus_recall_prints_hits_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def remember() -> str:
        runtime = make_runtime(tmp_path, memory_turns_threshold=1, memory_idle_seconds=0)
        try:
            return (await say(runtime, "We decided to use PostgreSQL for billing.")) and (
                (await runtime.engine.respond(inbound("/status"))).session_id or ""
            )
        finally:
            await runtime.aclose()

    session_id = asyncio.run(remember())
    monkeypatch.setenv("CHORUS_DATABASE_URL", f"sqlite:///{tmp_path / 'chorus.db'}")
    monkeypatch.setenv("CHORUS_DATA_DIR", str(tmp_path / "data"))
    config = str(Path(__file__).resolve().parents[2] / "config.yaml")
    assert chorus(["--config", config, "recall", session_id[:10], "postgresql billing", "-k", "1"]) == 0
    printed = capsys.readouterr().out.strip()
    # The message and the decision distilled from it share one slot, shown as the message.
    assert printed.startswith("1. [user message #1, 20")
    assert "Alice: We decided to use PostgreSQL for billing. (score 0.0" in printed
    assert chorus(["--config", config, "recall", session_id, "billing", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [(hit["kind"], hit["seqs"]) for hit in hits] == [("message", [1, 1]), ("message", [2, 2])]
    assert hits[0]["speaker"] == "Alice" and hits[0]["date"].startswith("20")
    assert hits[0]["score"] > hits[1]["score"] > 0
    assert chorus(["--config", config, "recall", "nosuchsession", "billing"]) == 2
    # A command on its own: with dense recall off it loads neither numpy nor the model.
    probe = (
        "import sys\n"
        "from bot.cli import main\n"
        f"main(['--config', {config!r}, 'recall', {session_id!r}, 'billing'])\n"
        "print(sorted({'numpy', 'bot.memory.minilm', 'bot.runtime'} & set(sys.modules)))"
    )
    environ = {**os.environ, "CHORUS_MEMORY_DENSE": "false"}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environ, check=True
    )
    assert "PostgreSQL for billing" in result.stdout and result.stdout.strip().endswith("[]")


async def test_recall_finds_messages_written_without_spaces(runtimes, tmp_path: Path) -> None:
    # No offload here: only the stored messages themselves can answer.
    quiet = runtimes(tmp_path, memory_turns_threshold=1000, memory_idle_seconds=0)
    await say(quiet, "我们决定把订单数据迁移到新的数据库服务器。")
    for n in range(3):
        await say(quiet, f"Unrelated chatter number {n}.")
    answer = await say(quiet, "/recall 数据库")
    first = answer.splitlines()[0]
    assert first.startswith("1. [user message #1, ")
    assert "新的数据库服务器" in first
