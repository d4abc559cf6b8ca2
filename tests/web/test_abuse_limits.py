"""A stranger minting visitors, flooding messages or holding streams open, and what is forgotten."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from bot.storage.models import utcnow
from channels.web.app import create_app
from channels.web.clients import StreamSlot
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.support.live_server import LiveServer
from tests.support.runtime import make_runtime
from tests.web.conftest import ClientFactory, parse_events
from tests.web.helpers import WebVisitor

DEADLINE = 60.0


async def test_new_visitors_are_limited_per_client_address(make_client: ClientFactory) -> None:
    client = await make_client(channels_web_visitors_per_ip_per_minute=3)
    visitors = [await WebVisitor.start(client) for _ in range(3)]
    refused = await new_visitor(client, {})
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
    assert "new visitors from your address" in refused.json()["detail"]
    # Visitors that exist keep working.
    resumed = await client.post("/api/session", json={}, headers=visitors[0].headers)
    assert resumed.status_code == 200 and resumed.json()["visitor_id"] == visitors[0].visitor_id


async def test_forwarded_for_counts_only_from_trusted_proxies(make_client: ClientFactory) -> None:
    # httpx's in-process transport connects from 127.0.0.1.
    behind_proxy = await make_client(
        channels_web_visitors_per_ip_per_minute=1, channels_web_trusted_proxies=["127.0.0.0/8"]
    )
    for address in ("203.0.113.5", "203.0.113.6"):
        created = await new_visitor(behind_proxy, {"X-Forwarded-For": address})
        assert created.status_code == 200, created.text
    again = await new_visitor(behind_proxy, {"X-Forwarded-For": "203.0.113.5"})
    assert again.status_code == 429
    # A client cannot pose as another by prepending to the header: the proxy's hop counts.
    spoofed = await behind_proxy.post(
        "/api/session", json={}, headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.6"}
    )
    assert spoofed.status_code == 429

    direct = await make_client(channels_web_visitors_per_ip_per_minute=1)
    assert (await new_visitor(direct, {"X-Forwarded-For": "192.0.2.1"})).status_code == 200
    # Without a trusted proxy the header is the client's own claim and is ignored.
    ignored = await new_visitor(direct, {"X-Forwarded-For": "192.0.2.2"})
    assert ignored.status_code == 429


async def test_messages_are_limited_per_address_across_visitors(make_client: ClientFactory) -> None:
    client = await make_client(
        channels_web_messages_per_ip_per_minute=2, channels_web_rate_limit_per_minute=10
    )
    first, second = await WebVisitor.start(client), await WebVisitor.start(client)
    await first.say("one")
    await second.say("two")
    limited = await first.post_message("three")
    assert limited.status_code == 429 and "messages from your address" in limited.json()["detail"]


async def test_streams_per_address_are_capped_and_stop_ends_a_stream(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Once upon a time"), "Then a short answer.")
    runtime = make_runtime(tmp_path, model_base_url=fake_openai.base_url, channels_web_streams_per_ip=1)
    try:
        async with (
            LiveServer(create_app(runtime)) as server,
            httpx.AsyncClient(base_url=server.base_url, timeout=DEADLINE) as client,
        ):
            visitor = await WebVisitor.start(client)
            other = await WebVisitor.start(client)
            url = f"/api/sessions/{visitor.session_id}/messages"
            async with client.stream(
                "POST", url, data={"text": "a long story"}, headers=visitor.headers
            ) as stream:
                lines = stream.aiter_lines()
                assert await asyncio.wait_for(anext(lines), DEADLINE) == "event: delta"
                second = await other.post_message("meanwhile")
                assert second.status_code == 429 and "at once (limit: 1)" in second.json()["detail"]
                stop = await client.post(f"/api/sessions/{visitor.session_id}/stop", headers=visitor.headers)
                assert stop.status_code == 200 and stop.json() == {"stopped": True}
                rest = "\n".join([line async for line in lines])
            done = parse_events("event: delta\n" + rest)[-1]
            assert done.name == "done" and done.data["status"] == "stopped"
            assert done.data["text"].startswith("Once upon a time")
            idle = await client.post(f"/api/sessions/{visitor.session_id}/stop", headers=visitor.headers)
            assert idle.json() == {"stopped": False}
            # The slot was freed: the next reply streams normally.
            assert (await other.say("now?"))[-1].data["text"] == "Then a short answer."
            messages = (await visitor.history())["messages"]
            assert [(m["role"], m["status"]) for m in messages] == [
                ("user", "complete"),
                ("assistant", "interrupted"),
            ]
    finally:
        await runtime.aclose()


async def test_idle_visitors_and_expired_link_codes_are_forgotten(client: httpx.AsyncClient) -> None:
    stores = client.runtime.stores  # type: ignore[attr-defined]
    silent = await WebVisitor.start(client)
    talker = await WebVisitor.start(client)
    await talker.say("hello")
    code = stores.identities.create_link_code(
        stores.identities.find_account("web", talker.visitor_id).person_id, timedelta(seconds=-1)
    )
    live_code = stores.identities.create_link_code(
        stores.identities.find_account("web", talker.visitor_id).person_id, timedelta(hours=1)
    )
    # Not idle long enough yet.
    assert stores.visitors.forget_idle_visitors(timedelta(hours=1)) == 0
    assert stores.visitors.forget_idle_visitors(timedelta(0)) == 1
    assert stores.visitors.visitor_for_token(silent.token) is None
    assert stores.identities.find_account("web", silent.visitor_id) is None
    assert (await silent.client.get("/api/session", headers=silent.headers)).status_code == 401
    assert (await talker.refresh())["visitor_id"] == talker.visitor_id
    assert stores.identities.delete_expired_link_codes() == 1
    with stores.database.connect() as connection:
        codes = [row[0] for row in connection.exec_driver_sql("select code from link_codes")]
    assert codes == [live_code.code] and code.code not in codes
    assert utcnow() < live_code.expires_at.replace(tzinfo=utcnow().tzinfo)


async def test_the_same_document_text_is_stored_once(client: httpx.AsyncClient) -> None:
    text = ("A long report. " * 200).encode()
    first, second = await WebVisitor.start(client), await WebVisitor.start(client)
    for visitor in (first, second, first):
        events = await visitor.say("read", files=[("files", ("report.txt", text, "text/plain"))])
        assert events[-1].name == "done"
    stores = client.runtime.stores  # type: ignore[attr-defined]
    with stores.database.connect() as connection:
        stored = connection.exec_driver_sql("select text is not null from attachments order by id").fetchall()
    assert [row[0] for row in stored] == [1, 0, 0]
    for visitor in (first, second):
        documents = stores.messages.session_documents(visitor.session_id)
        assert documents and all(document.text == text.decode() for document in documents)


async def new_visitor(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    client.cookies.clear()  # no cookie: the request asks for a new visitor
    return await client.post("/api/session", json={}, headers=headers)


async def test_a_stream_slot_is_freed_on_the_event_loop(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    freed_on: list[int] = []
    close = StreamSlot.close

    def recording_close(slot: StreamSlot) -> None:
        freed_on.append(threading.get_ident())
        close(slot)

    monkeypatch.setattr(StreamSlot, "close", recording_close)
    client = await make_client()
    visitor = await WebVisitor.start(client, name="Ann")
    await visitor.say("hello")
    # Freed where slots are taken, with no thread hop: the counts never race.
    assert freed_on and set(freed_on) == {threading.get_ident()}
