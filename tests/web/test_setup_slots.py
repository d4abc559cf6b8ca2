"""Requests take turns to be set up; a stalled upload or a streaming reply holds no turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from starlette.types import Message, Receive, Scope, Send

from channels.web.admission import SetupSlots
from channels.web.app import create_app
from tests.support.live_server import LiveServer
from tests.support.runtime import make_runtime
from tests.web.helpers import WebVisitor

DEADLINE = 60.0
HTTP_SCOPE: Scope = {"type": "http", "method": "GET", "path": "/", "headers": []}


class SettingUp:
    """An ASGI app whose requests stay in set-up until released, counting how many overlap."""

    def __init__(self) -> None:
        self.inside = 0
        self.most_inside = 0
        self.order: list[int] = []
        self.release = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        self.order.append(scope["number"])
        await self.release.wait()
        self.inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def call(app: SetupSlots, number: int, sent: list[Message]) -> None:
    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app({**HTTP_SCOPE, "number": number}, receive, send)


async def test_requests_beyond_the_slots_wait_in_arrival_order_and_none_is_refused() -> None:
    inner = SettingUp()
    app = SetupSlots(inner, slots=2)
    sent: list[Message] = []
    requests = [asyncio.create_task(call(app, number, sent)) for number in range(6)]
    while len(inner.order) < 2:
        await asyncio.sleep(0)
    for _ in range(20):
        await asyncio.sleep(0)
    # Two are being set up; the other four wait for a slot.
    assert inner.order == [0, 1]
    inner.release.set()
    await asyncio.wait_for(asyncio.gather(*requests), DEADLINE)
    assert inner.most_inside == 2
    assert inner.order == [0, 1, 2, 3, 4, 5]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [200] * 6


async def test_a_started_response_gives_its_slot_to_the_next_request() -> None:
    streaming = asyncio.Event()
    finish_stream = asyncio.Event()

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["number"] == 0:
            streaming.set()
            await finish_stream.wait()
        await send({"type": "http.response.body", "body": b"done"})

    app = SetupSlots(inner, slots=1)
    sent: list[Message] = []
    stream = asyncio.create_task(call(app, 0, sent))
    await asyncio.wait_for(streaming.wait(), DEADLINE)
    # The first response is still streaming, yet the second request is served.
    await asyncio.wait_for(call(app, 1, sent), DEADLINE)
    assert not stream.done()
    finish_stream.set()
    await asyncio.wait_for(stream, DEADLINE)


async def test_a_stalled_upload_does_not_keep_other_visitors_waiting(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, channels_web_requests_setting_up=1)
    try:
        async with (
            LiveServer(create_app(runtime)) as server,
            httpx.AsyncClient(base_url=server.base_url, timeout=DEADLINE) as client,
        ):
            uploader = await WebVisitor.start(client)
            # Headers of a large message, a first piece of its body, then nothing more.
            reader, writer = await asyncio.open_connection(server.host, server.port)
            writer.write(
                (
                    f"POST /api/sessions/{uploader.session_id}/messages HTTP/1.1\r\n"
                    f"Host: {server.host}\r\n"
                    f"Authorization: {uploader.headers['Authorization']}\r\n"
                    "Content-Type: multipart/form-data; boundary=cut\r\n"
                    "Content-Length: 1000000\r\n\r\n"
                    '--cut\r\nContent-Disposition: form-data; name="text"\r\n\r\nhel'
                ).encode()
            )
            await writer.drain()
            try:
                other = await WebVisitor.start(client)
                events = await asyncio.wait_for(other.say("is anyone there?"), DEADLINE)
                assert events[-1].name == "done" and events[-1].data["text"]
            finally:
                writer.close()
                await writer.wait_closed()
    finally:
        await runtime.aclose()
