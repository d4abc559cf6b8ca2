"""A call waiting for approval outlives its process: kill -9 between asking and clicking, and the
click on the restarted `chorus serve` runs it and the turn goes on; two processes on PostgreSQL
that both take the click run it once; a process that loses its conversation lock mid-approval
and the one that resumes its turn leave one result for the call and one reply. The call is the
npm filesystem server's `write_file`."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.turns.approvals import RUN_ELSEWHERE_RESULT
from bot.turns.notices import WAITING_AT_SHUTDOWN
from tests.durable.serve_process import ServeProcess, wait_until
from tests.durable.test_recovery import environment, sqlite_rows
from tests.durable.test_shutdown import read_events
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.peers import needs_postgres
from tests.support.postgres import end_lock_holders, fresh_database, rows_of
from tests.tools.mcp_support import npm_server

WRITE = "fs__write_file"


def settings(database_url: str, fake_openai: FakeOpenAI, folder: Path) -> dict[str, str]:
    return environment(
        database_url,
        fake_openai,
        CHORUS_TOOLS_MCP_SERVERS=json.dumps({"fs": npm_server("filesystem", str(folder))}),
        # The visitors are members: their own yes runs their write (the public is refused it).
        CHORUS_CHANNELS_WEB_ACCESS_STRANGERS="members",
    )


async def started(serve: ServeProcess) -> ServeProcess:
    """Serving, with its filesystem server connected (`chorus serve` connects it in the background)."""
    await serve.start()
    await wait_until(lambda: serve.log_lines("MCP server fs: ready"), what="the filesystem server ready")
    return serve


@dataclass
class WebTurn:
    """A visitor's turn streaming over HTTP, read until its call asked."""

    session_id: str
    approval_id: int
    response: httpx.Response
    lines: AsyncIterator[str]

    async def answer(self) -> str:
        """The rest of the stream: the stored reply's text."""
        events = await read_events(self.lines, until_first_delta=False)
        await self.response.aclose()
        return str(events[-1]["text"])


async def ask_in_the_web(client: httpx.AsyncClient, base: str, text: str) -> WebTurn:
    state = (await client.post(f"{base}/api/session", json={})).json()
    client.cookies.clear()
    client.headers["Authorization"] = f"Bearer {state['token']}"
    url = f"{base}/api/sessions/{state['session_id']}/messages"
    response = await client.send(client.build_request("POST", url, data={"text": text}), stream=True)
    lines = response.aiter_lines()
    events: list[dict[str, Any]] = []
    name = ""
    async for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append({"event": name, **json.loads(line.removeprefix("data: "))})
            if name == "tool" and events[-1]["status"] == "asked":
                return WebTurn(state["session_id"], int(events[-1]["approval_id"]), response, lines)
    raise AssertionError(f"the turn never asked: {events}")


async def click(client: httpx.AsyncClient, base: str, turn: WebTurn) -> dict[str, Any]:
    url = f"{base}/api/sessions/{turn.session_id}/approvals/{turn.approval_id}"
    response = await client.post(url, json={"approve": True})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.mark.parametrize("restart", ["kill -9", "SIGTERM"])
async def test_a_click_after_a_restart_runs_the_call_and_the_turn_goes_on(
    tmp_path: Path, fake_openai: FakeOpenAI, restart: str
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    note = folder / "note.txt"
    database = tmp_path / "chorus.db"
    fake_openai.script(ToolCalls([(WRITE, {"path": str(note), "content": "buy milk"})]), "Written down.")
    environ = settings(f"sqlite:///{database}", fake_openai, folder)
    environ["CHORUS_SHUTDOWN_GRACE_SECONDS"] = "1"
    first = ServeProcess(tmp_path, environ, name="first")
    try:
        await started(first)
        async with httpx.AsyncClient(timeout=60) as client:
            turn = await ask_in_the_web(client, first.url, "Write down: buy milk")
            if restart == "kill -9":
                first.kill()
            else:
                first.signal(signal.SIGTERM)
                # The visitor is told the call still waits; nothing about it is stored.
                assert await turn.answer() == WAITING_AT_SHUTDOWN
            await first.wait()
            assert sqlite_rows(database, "SELECT state FROM approvals") == [("pending",)]
            assert sqlite_rows(database, "SELECT count(*) FROM messages WHERE role != 'user'") == [(1,)]

            second = await started(ServeProcess(tmp_path, environ, name="second"))
            try:
                result = await click(client, second.url, turn)
                assert result == {"decided": True, "state": "approved", "text": "Approved."}
                await wait_until(
                    lambda: (
                        sqlite_rows(
                            database,
                            "SELECT content FROM messages WHERE role = 'assistant' AND kind = 'message'",
                        )
                        == [("Written down.",)]
                    ),
                    what="the turn finished after the restart",
                )
                again = await click(client, second.url, turn)
            finally:
                second.signal(signal.SIGTERM)
                assert await second.wait() == 0, second.log()
    finally:
        first.kill()

    assert again["decided"] is False and again["text"] == "Already approved."
    assert note.read_text() == "buy milk"
    [(state_now, outcome)] = sqlite_rows(database, "SELECT state, outcome FROM approvals")
    assert (state_now, outcome) == ("approved", "ok")
    assert len(second.log_lines("recovered message")) == 1


@needs_postgres
async def test_two_processes_on_postgresql_both_take_the_click_and_the_call_runs_once(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    note = folder / "count.txt"
    fake_openai.script(ToolCalls([(WRITE, {"path": str(note), "content": "once"})]), "Written once.")
    with fresh_database() as database_url:
        environ = settings(database_url, fake_openai, folder)
        one = ServeProcess(tmp_path, environ, name="one")
        two = ServeProcess(tmp_path, environ, name="two")
        try:
            await asyncio.gather(started(one), started(two))
            async with httpx.AsyncClient(timeout=60) as client:
                turn = await ask_in_the_web(client, one.url, "Write it once")
                # The same click reaches both processes at once (two tabs, a retried request).
                results = await asyncio.gather(click(client, one.url, turn), click(client, two.url, turn))
                answer = await turn.answer()
        finally:
            for serve in (one, two):
                serve.signal(signal.SIGTERM)
            for serve in (one, two):
                assert await serve.wait() == 0, serve.log()

    assert answer == "Written once."
    assert sorted(result["decided"] for result in results) == [False, True]
    assert note.read_text() == "once"
    ran = one.log_lines(f"tool call {WRITE} ok") + two.log_lines(f"tool call {WRITE} ok")
    assert len(ran) == 1, ran


@needs_postgres
async def test_a_turn_resumed_while_its_first_process_waits_on_the_approval_keeps_one_result_per_call(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    note = folder / "once.txt"
    fake_openai.script(ToolCalls([(WRITE, {"path": str(note), "content": "once"})]), "Written once.")
    with fresh_database() as database_url:
        environ = settings(database_url, fake_openai, folder)
        one = ServeProcess(tmp_path, environ, name="one")
        two = ServeProcess(tmp_path, environ, name="two")
        try:
            await started(one)
            async with httpx.AsyncClient(timeout=60) as client:
                turn = await ask_in_the_web(client, one.url, "Write it once")
                # The first process loses its conversation lock, and the lock that says it is
                # alive: the second, started now, takes its turn for a dead process's and resumes it.
                assert end_lock_holders(database_url) >= 2
                await started(two)
                await wait_until(
                    lambda: two.log_lines("waits again for approval"), what="the resumed turn waiting"
                )
                # The click reaches the first process, still waiting on the call as well.
                assert (await click(client, one.url, turn))["decided"] is True
                answer = await turn.answer()
                await wait_until(lambda: two.log_lines("recovered message"), what="the resumed turn ended")
        finally:
            for serve in (one, two):
                serve.signal(signal.SIGTERM)
            for serve in (one, two):
                await serve.wait()
        results = rows_of(
            database_url,
            "SELECT tool_call_id, count(*) FROM messages WHERE kind = 'tool_result' GROUP BY tool_call_id",
        )
        replies = rows_of(
            database_url, "SELECT content FROM messages WHERE role = 'assistant' AND kind = 'message'"
        )

    assert answer == "Written once."
    assert note.read_text() == "once"
    assert [count for _, count in results] == [1], results
    assert replies == [("Written once.",)]
    # The model was asked for the call, then once with its one result; never told it was not run.
    turns = [request.json for request in fake_openai.requests if asks_about(request.json, "Write it once")]
    assert len(turns) == 2, turns
    assert [message["role"] for message in turns[1]["messages"]].count("tool") == 1
    assert all(RUN_ELSEWHERE_RESULT not in json.dumps(body) for body in turns)


def asks_about(body: dict[str, Any], text: str) -> bool:
    """A request of the turn that answers `text` (not of the memory job that reads it later)."""
    return any(message["role"] == "user" and message.get("content") == text for message in body["messages"])
