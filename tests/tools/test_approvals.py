"""Calls that wait for a person's yes or no, through the engine and a real OpenAI-compatible
server on 127.0.0.1: approved, denied, expired, clicked twice, stopped, and on PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text

from bot.providers.base import ToolCall
from bot.runtime import Runtime
from bot.storage.message_append import NewMessage
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools
from bot.turns.approvals import CANCELLED_RESULT, DENIED_RESULT, EXPIRED_RESULT, RUN_ELSEWHERE_RESULT
from bot.turns.events import Reply, ToolStep, TurnEvent
from bot.turns.round_calls import progress_summary
from channels.terminal import chat_loop
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.runtime import inbound
from tests.tools.mcp_support import npm_server
from tests.tools.test_mcp_turns import started_runtime
from transcript import StoredToolCall

DEADLINE = 60.0
ASKER = "web:u1"


class Note(BaseModel):
    text: str


@dataclass
class Notebook:
    """`write_note {text}`: a side effect a test counts. With a `gate`, each call waits for it
    to open before writing, so a test can look at a call that is still running."""

    written: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None

    def install(self, runtime: Runtime) -> Notebook:
        async def write_note(context: ToolContext, arguments: Note) -> object:
            if self.gate is not None:
                await self.gate.wait()
            self.written.append(arguments.text)
            return {"written": arguments.text}

        tool = FunctionTool("write_note", "Write a note down.", Note, write_note, read_only=False)
        runtime.tools.add_source(StaticTools([tool]))
        return self


@dataclass
class Turn:
    """A turn streaming in the background; its events as they come."""

    events: list[TurnEvent]
    task: asyncio.Task[None]

    async def asked(self) -> ToolStep:
        async with asyncio.timeout(DEADLINE):
            while True:
                for event in self.events:
                    if isinstance(event, ToolStep) and event.status == "asked":
                        return event
                if self.task.done():
                    raise AssertionError(f"the turn ended without asking: {self.events}")
                await asyncio.sleep(0.02)

    async def reply(self) -> Reply:
        async with asyncio.timeout(DEADLINE):
            await self.task
        final = self.events[-1]
        assert isinstance(final, Reply)
        return final


@asynccontextmanager
async def turn(runtime: Runtime, text: str, **overrides: Any) -> AsyncIterator[Turn]:
    events: list[TurnEvent] = []

    async def play() -> None:
        async for event in runtime.engine.stream(inbound(text, **overrides)):
            events.append(event)

    task = asyncio.create_task(play())
    try:
        yield Turn(events, task)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def approving_runtime(runtimes, tmp_path: Path, model: FakeOpenAI, **overrides: Any) -> Runtime:
    return runtimes(
        tmp_path, model_base_url=model.base_url, tools_approve={"write_note": {"members": "ask"}}, **overrides
    )


def results_sent(model: FakeOpenAI) -> list[str]:
    last = [request.json for request in model.requests if not request.is_summary][-1]
    return [message["content"] for message in last["messages"] if message["role"] == "tool"]


def steps(events: list[TurnEvent]) -> list[str]:
    return [event.status for event in events if isinstance(event, ToolStep)]


async def test_an_approved_call_runs_once_and_the_decision_is_stored_beside_it(
    database: dict[str, str], runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "buy milk"})]), "Noted.")
    runtime = approving_runtime(runtimes, tmp_path, fake_openai, **database)
    notebook = Notebook().install(runtime)
    approvals = runtime.engine.approvals

    async with turn(runtime, "Note: buy milk") as running:
        asked = await running.asked()
        assert asked.name == "write_note" and asked.summary == "buy milk"
        assert asked.progress_line == "❓ write_note: buy milk · run it? (yes/no)"
        assert notebook.written == []
        assert approval_id(asked) is not None
        # Someone else's click decides nothing.
        stranger = await approvals.decide(approval_id(asked), True, "web:someone-else")
        assert not stranger.ok
        first, second = await asyncio.gather(
            approvals.decide(approval_id(asked), True, ASKER),
            approvals.decide(approval_id(asked), True, ASKER),
        )
        reply = await running.reply()

    assert sorted([first.ok, second.ok]) == [False, True]
    assert reply.text == "Noted."
    assert notebook.written == ["buy milk"]
    assert steps(running.events) == ["started", "asked", "done"]
    stored = runtime.stores.approvals.get(approval_id(asked))
    assert stored is not None
    assert (stored.state, stored.decided_by, stored.outcome) == ("approved", ASKER, "ok")
    assert stored.decided_at is not None and stored.ran_by == runtime.engine.instance_id


def short(path: Path) -> str:
    """A path as a progress line shows it, shortened."""
    return progress_summary(ToolCall("c", "fs__write_file", json.dumps({"path": str(path)})))


def approval_id(step: ToolStep) -> int:
    assert step.approval_id is not None
    return step.approval_id


async def test_a_denied_call_never_runs_and_the_model_reads_that_the_user_denied_it(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "sell the car"})]), "I did not write it.")
    runtime = approving_runtime(runtimes, tmp_path, fake_openai)
    notebook = Notebook().install(runtime)

    async with turn(runtime, "Note: sell the car") as running:
        asked = await running.asked()
        assert (await runtime.engine.approvals.decide(approval_id(asked), False, ASKER)).ok
        reply = await running.reply()

    assert reply.text == "I did not write it."
    assert notebook.written == []
    assert results_sent(fake_openai) == [f"Error: {DENIED_RESULT}"]
    assert steps(running.events) == ["started", "asked", "denied"]
    stored = runtime.stores.approvals.get(approval_id(asked))
    assert stored is not None and (stored.state, stored.decided_by) == ("denied", ASKER)


async def test_no_answer_in_time_denies_the_call_and_a_late_click_changes_nothing(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "later"})]), "Nobody said yes.")
    runtime = approving_runtime(runtimes, tmp_path, fake_openai, tools_approval_seconds=0.5)
    notebook = Notebook().install(runtime)

    async with turn(runtime, "Note: later") as running:
        asked = await running.asked()
        reply = await running.reply()
    late = await runtime.engine.approvals.decide(approval_id(asked), True, ASKER)

    assert reply.text == "Nobody said yes."
    assert results_sent(fake_openai) == [f"Error: {EXPIRED_RESULT}"]
    assert not late.ok and late.text == "Already expired (denied)."
    assert notebook.written == []


async def test_stop_cancels_the_pending_approval_so_a_later_click_runs_nothing(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "never"})]), "unused")
    runtime = approving_runtime(runtimes, tmp_path, fake_openai)
    notebook = Notebook().install(runtime)

    async with turn(runtime, "Note: never") as running:
        asked = await running.asked()
        stop = await runtime.engine.respond(inbound("/stop"))
        reply = await running.reply()
    late = await runtime.engine.approvals.decide(approval_id(asked), True, ASKER)

    assert stop.text == "Stopped."
    assert reply.status == "stopped"
    assert not late.ok and late.text == "Already cancelled (the turn stopped)."
    stored = runtime.stores.approvals.get(approval_id(asked))
    assert stored is not None and stored.state == "cancelled"
    assert notebook.written == []


async def test_stop_sent_to_another_process_cancels_the_waiting_call_there(
    database: dict[str, str], runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "never"})]), "It was not written.")
    waiting = approving_runtime(runtimes, tmp_path, fake_openai, **database)
    other = approving_runtime(runtimes, tmp_path, fake_openai, **database)
    notebook = Notebook().install(waiting)

    async with turn(waiting, "Note: never") as running:
        asked = await running.asked()
        # The other process runs no turn of this conversation: only the stored question stops.
        stop = await other.engine.respond(inbound("/stop"))
        reply = await running.reply()
    late = await waiting.engine.approvals.decide(approval_id(asked), True, ASKER)

    assert stop.text == "Stopped."
    assert reply.text == "It was not written."
    assert results_sent(fake_openai) == [f"Error: {CANCELLED_RESULT}"]
    assert not late.ok and notebook.written == []


async def test_an_admin_decides_anyones_call_and_deny_offers_nothing_to_run(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        ToolCalls([("write_note", {"text": "from bob"})]),
        "Written.",
        ToolCalls([("erase_notes", {"text": "all"})]),
        "Refused.",
    )
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        tools_approve={"write_note": {"members": "ask"}, "erase_*": {"members": "deny"}},
        channels_telegram_access_admins=["42"],
    )
    notebook = Notebook().install(runtime)
    erased: list[str] = []

    async def erase(context: ToolContext, arguments: Note) -> object:
        erased.append(arguments.text)
        return "erased"

    runtime.tools.add_source(
        StaticTools([FunctionTool("erase_notes", "Erase notes.", Note, erase, read_only=False)])
    )

    async with turn(runtime, "Note from Bob", user_id="bob") as running:
        asked = await running.asked()
        # A member other than the asker decides nothing; the Telegram admin decides.
        assert not (await runtime.engine.approvals.decide(approval_id(asked), True, ASKER)).ok
        assert (await runtime.engine.approvals.decide(approval_id(asked), True, "telegram:42")).ok
        await running.reply()
    async with turn(runtime, "Erase everything", user_id="bob") as running:
        reply = await running.reply()

    assert notebook.written == ["from bob"]
    assert reply.text == "Refused."
    # Denied: not offered, so the call is answered as unknown and nothing runs.
    assert erased == [] and steps(running.events) == ["started", "error"]
    assert "no tool named 'erase_notes'" in results_sent(fake_openai)[-1]


async def test_a_public_askers_call_waits_for_an_admin_not_for_the_asker(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "from a visitor"})]), "Written.")
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        tools_approve={"write_note": {"public": "ask"}},
        channels_web_access_strangers="public",
        channels_telegram_access_admins=["42"],
    )
    notebook = Notebook().install(runtime)

    async with turn(runtime, "Note this") as running:
        asked = await running.asked()
        own = await runtime.engine.approvals.decide(approval_id(asked), True, ASKER)
        assert not own.ok and "admin" in own.text
        assert (await runtime.engine.approvals.decide(approval_id(asked), True, "telegram:42")).ok
        await running.reply()

    assert notebook.written == ["from a visitor"]


async def test_in_the_terminal_y_runs_the_filesystem_servers_write_and_n_does_not(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    kept, refused = folder / "kept.txt", folder / "refused.txt"
    fake_openai.script(
        ToolCalls([("fs__write_file", {"path": str(kept), "content": "yes"})]),
        "Written.",
        ToolCalls([("fs__write_file", {"path": str(refused), "content": "no"})]),
        "Not written.",
    )
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, fs=npm_server("filesystem", str(folder)))
    screen = io.StringIO()

    typed = io.StringIO("write kept\ny\nwrite refused\nn\n")
    await chat_loop(runtime.engine, user="ada", stdin=typed, stdout=screen)

    shown = screen.getvalue()
    question = "  ❓ fs__write_file: {path} · run it? (yes/no)\n  run it? [y/N]   {answer}\n"
    assert question.format(path=short(kept), answer="Approved.") in shown
    not_run = f"  🚫 fs__write_file: {short(refused)} · not run\n"
    assert question.format(path=short(refused), answer="Denied.") + not_run in shown
    assert "bot › Written." in shown and "bot › Not written." in shown
    assert kept.read_text() == "yes" and not refused.exists()


async def test_two_processes_waiting_on_one_approval_run_the_approved_call_once(
    postgres_url: str, runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    # The second process answers the first's turn only once the first's session lock is gone
    # (its connection dropped); then both wait on the one stored question.
    fake_openai.script(ToolCalls([("write_note", {"text": "once"})]), "Noted.", "Noted.")
    first = approving_runtime(runtimes, tmp_path, fake_openai, database_url=postgres_url)
    second = approving_runtime(runtimes, tmp_path, fake_openai, database_url=postgres_url)
    notebook = Notebook().install(first)
    Notebook(notebook.written).install(second)

    async with turn(first, "Note: once") as running:
        asked = await running.asked()
        [delivery] = second.stores.deliveries.unfinished(
            datetime.now(UTC) - timedelta(minutes=5), ["web"], second.engine.instance_id
        )
        with second.database.begin() as connection:
            connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks"
                    " WHERE locktype = 'advisory' AND pid != pg_backend_pid()"
                    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                )
            )
        events: list[TurnEvent] = []
        resumed = Turn(events, asyncio.create_task(_collect(second.engine.resume(delivery), events)))
        # The second process waits on the same question, not a new one.
        assert approval_id(await resumed.asked()) == approval_id(asked)
        decided = await second.engine.approvals.decide(approval_id(asked), True, ASKER)
        reply = await running.reply()
        async with asyncio.timeout(DEADLINE):
            await resumed.task

    assert decided.ok
    assert notebook.written == ["once"]
    stored = first.stores.approvals.get(approval_id(asked))
    assert stored is not None and stored.state == "approved" and stored.outcome == "ok"
    # One exchange, one unit: the process that ran the call answered the turn; the other
    # stored nothing of its own and asked the model nothing.
    [resumed_reply] = [event for event in events if isinstance(event, Reply)]
    answers = {one.kind: one.text for one in (reply, resumed_reply)}
    assert answers == {"assistant": "Noted.", "duplicate": ""}
    rows = first.stores.messages.turn_rows(delivery.session_id, delivery.user_message_id)
    assert [row.tool_call_id for row in rows if row.role == "tool"] == [asked.call_id]
    turn_requests = [
        request
        for request in fake_openai.requests
        if any(message.get("content") == "Note: once" for message in request.json["messages"])
    ]
    assert len(turn_requests) == 2


async def test_a_calls_result_is_stored_once_whichever_process_stores_it(
    database: dict[str, str], runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, **database)
    stores = runtime.stores
    account = stores.identities.account("web", "u1", "Ada", None)
    session = stores.sessions.private_session(account.person_id, "ada").id
    asked = stores.messages.append(session, NewMessage(role="user", content="Note it", token_count=2))

    def call_row() -> int:
        call = StoredToolCall("call_0", "write_note", '{"text": "once"}')
        message = NewMessage(
            role="assistant",
            content="",
            token_count=1,
            kind="tool_call",
            tool_calls=(call,),
            reply_to_id=asked.id,
        )
        return stores.messages.append(session, message).seq

    def result(text: str) -> NewMessage:
        return NewMessage(
            role="tool",
            content=text,
            token_count=1,
            kind="tool_result",
            tool_call_id="call_0",
            tool_name="write_note",
            reply_to_id=asked.id,
        )

    first_round = call_row()
    ran = stores.messages.append_result(session, first_round, result("written"))
    again = stores.messages.append_result(session, first_round, result(RUN_ELSEWHERE_RESULT))
    assert (again.id, again.content) == (ran.id, "written")
    # A later round's call may carry the same id (some servers number each answer's calls afresh).
    later = stores.messages.append_result(session, call_row(), result("written again"))
    assert later.id != ran.id
    rows = stores.messages.turn_rows(session, asked.id)
    assert [row.content for row in rows if row.role == "tool"] == ["written", "written again"]
    assert stores.messages.result_of(session, first_round, "call_0") == ran.row


async def _collect(stream: AsyncIterator[TurnEvent], events: list[TurnEvent]) -> None:
    async for event in stream:
        events.append(event)
