"""Two `chorus serve` processes on one PostgreSQL, one session: every reply right after its question."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from tests.durable.serve_process import ServeProcess
from tests.durable.test_shutdown import read_events
from tests.fakes.openai_server import FakeOpenAI
from tests.support.peers import needs_postgres

MESSAGES = 50


def replies_out_of_place(database_url: str, session_id: str) -> tuple[int, int]:
    """(replies whose previous conversation row is not their question, replies)."""
    database = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://"))
    with database.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT id, role, reply_to_id FROM messages WHERE session_id = :session "
                "AND role IN ('user', 'assistant') ORDER BY seq"
            ),
            {"session": session_id},
        ).all()
    database.dispose()
    replies = [(index, row) for index, row in enumerate(rows) if row.role == "assistant"]
    misplaced = sum(1 for index, row in replies if index == 0 or rows[index - 1].id != row.reply_to_id)
    return misplaced, len(replies)


@needs_postgres
async def test_one_sessions_turns_never_interleave_across_processes(
    tmp_path: Path, fake_openai: FakeOpenAI, postgres_url: str
) -> None:
    settings = {"CHORUS_DATABASE_URL": postgres_url, "CHORUS_MODEL_BASE_URL": fake_openai.base_url}
    servers = [ServeProcess(tmp_path, settings, name=f"serve{n}") for n in range(2)]
    try:
        await servers[0].start()
        await servers[1].start()
        async with httpx.AsyncClient(timeout=120) as client:
            state = (await client.post(f"{servers[0].url}/api/session", json={})).json()
            client.cookies.clear()
            headers = {"Authorization": f"Bearer {state['token']}"}

            async def ask(number: int) -> list[dict[str, object]]:
                server = servers[number % 2]
                async with client.stream(
                    "POST",
                    f"{server.url}/api/sessions/{state['session_id']}/messages",
                    headers=headers,
                    data={"text": f"question {number}", "client_id": f"q{number}"},
                ) as response:
                    assert response.status_code == 200
                    return await read_events(response.aiter_lines(), until_first_delta=False)

            answers = await asyncio.gather(*(ask(number) for number in range(MESSAGES)))
    finally:
        for server in servers:
            server.signal(15)
        codes = [await server.wait() for server in servers]

    assert codes == [0, 0]
    done = [events[-1] for events in answers]
    assert all(event["event"] == "done" and event["status"] == "complete" for event in done)
    assert replies_out_of_place(postgres_url, state["session_id"]) == (0, MESSAGES)
