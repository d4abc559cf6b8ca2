"""How many HTTP requests the server sets up at once; the others wait their turn.

Setting a request up (parsing it, resolving the visitor, storing the message, building
the turn) is short CPU and database work. When hundreds of requests arrive in the same
instant, asyncio runs every one of those steps that is ready in one pass of the event
loop, and each pass then took 100–300 ms: long enough to delay every other lane's
timers, heartbeats and replies. A few setting-up slots keep each pass short without
lowering throughput, since the work is CPU-bound either way. A request leaves its slot
when its response starts (a reply then streams without one) and while it waits for its
body to arrive, so a slow or stalled upload never holds a slot. Nothing is refused:
waiting requests are admitted in the order they came.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class SetupSlots:
    """ASGI middleware: at most `slots` HTTP requests are being set up at once."""

    def __init__(self, app: ASGIApp, slots: int) -> None:
        self.app = app
        self.slots = asyncio.Semaphore(slots)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _SlotHolder(self.slots)
        await request.take()
        try:
            await self.app(scope, request.receiving(receive), request.sending(send))
        finally:
            request.leave()


class _SlotHolder:
    """One request's claim on a slot, from arrival until its response starts."""

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self.slots = slots
        self.holding = False
        self.responding = False

    async def take(self) -> None:
        await self.slots.acquire()
        self.holding = True

    def leave(self) -> None:
        if self.holding:
            self.holding = False
            self.slots.release()

    def receiving(self, receive: Receive) -> Receive:
        async def receive_without_slot() -> Message:
            if self.responding or not self.holding:
                return await receive()
            # The client's bytes may be slow to come: wait for them without the slot.
            self.leave()
            message = await receive()
            if not self.responding:
                await self.take()
            return message

        return receive_without_slot

    def sending(self, send: Send) -> Send:
        async def send_and_leave(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.responding = True
                self.leave()
            await send(message)

        return send_and_leave
