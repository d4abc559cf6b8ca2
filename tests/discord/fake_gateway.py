"""Discord's gateway (API v10) as its documentation describes it, for one bot on 127.0.0.1.

- `compress=zlib-stream`: one zlib context per connection; every payload ends in a
  Z_SYNC_FLUSH (`00 00 ff ff`), and a large payload may arrive over several binary
  messages, so the client must buffer until the suffix. `compress=zstd-stream`: one zstd
  stream per connection, one payload per message. No `compress`: JSON text frames.
- HELLO (op 10) first; heartbeats (op 1) are acknowledged (op 11).
- IDENTIFY (op 2) checks the token (close 4004) and the privileged intents the application
  may use (close 4014), then opens a session: READY with `session_id` and
  `resume_gateway_url`, then GUILD_CREATE.
- Every dispatch of a session is kept with its sequence number. RESUME (op 6) at the resume
  URL replays what the client missed after its `seq`, then sends RESUMED; an unknown or
  closed session gets op 9 (invalid session, not resumable).
- Tests can ask the client to reconnect (op 7), invalidate the session (op 9, resumable or
  not) or close the connection with any code; the close code the client sends is recorded.
- Sharding: IDENTIFY's `shard` [id, count] opens a session for that shard (an id not below
  the count is closed with 4010). A guild's events go to shard (guild_id >> 22) % count,
  everything else (DMs) to shard 0; READY lists only the shard's guilds. Without `shard`
  a session is shard 0 of 1 and gets every event.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import WSCloseCode, WSMsgType, web

HEARTBEAT_INTERVAL_MS = 41250
MESSAGE_CONTENT_INTENT = 1 << 15
PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | MESSAGE_CONTENT_INTENT  # members, presences, content
# A zlib payload larger than this is sent in two websocket messages, as Discord may do.
SPLIT_ABOVE = 512
ZLIB_SUFFIX = b"\x00\x00\xff\xff"


class Codec(Protocol):
    def frames(self, text: str) -> list[str | bytes]: ...


class PlainCodec:
    def frames(self, text: str) -> list[str | bytes]:
        return [text]


class ZlibStreamCodec:
    """One compression context for the whole connection, flushed after every payload."""

    def __init__(self) -> None:
        self._context = zlib.compressobj()
        self.split_payloads = 0

    def frames(self, text: str) -> list[str | bytes]:
        data = self._context.compress(text.encode()) + self._context.flush(zlib.Z_SYNC_FLUSH)
        assert data.endswith(ZLIB_SUFFIX)
        if len(data) <= SPLIT_ABOVE:
            return [data]
        half = len(data) // 2
        self.split_payloads += 1
        assert not data[:half].endswith(ZLIB_SUFFIX)
        return [data[:half], data[half:]]


class ZstdStreamCodec:
    def __init__(self) -> None:
        import zstandard  # only when a client asks for zstd-stream

        self._flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
        self._context = zstandard.ZstdCompressor().compressobj()

    def frames(self, text: str) -> list[str | bytes]:
        return [self._context.compress(text.encode()) + self._context.flush(self._flush)]


CODECS: dict[str | None, Callable[[], Codec]] = {
    None: PlainCodec,
    "zlib-stream": ZlibStreamCodec,
    "zstd-stream": ZstdStreamCodec,
}


@dataclass
class GatewaySession:
    id: str
    # [shard id, shard count] as the client identified.
    shard: tuple[int, int] = (0, 1)
    events: list[dict[str, Any]] = field(default_factory=list)
    seq: int = 0
    open: bool = True


def shard_of(guild_id: int | None, shard_count: int) -> int:
    """The shard Discord sends a guild's events to; DMs (no guild) go to shard 0."""
    return 0 if guild_id is None else (guild_id >> 22) % shard_count


@dataclass
class Connection:
    """One websocket connection; `close_code` is the code the client closed it with."""

    socket: web.WebSocketResponse
    codec: Codec
    path: str
    compress: str | None
    session: GatewaySession | None = None
    heartbeats: int = 0
    close_code: int | None = None
    closed_by_server: int | None = None

    async def send(self, payload: dict[str, Any]) -> None:
        if self.socket.closed:
            return
        for frame in self.codec.frames(json.dumps(payload)):
            if isinstance(frame, bytes):
                await self.socket.send_bytes(frame)
            else:
                await self.socket.send_str(frame)


class FakeGateway:
    """The gateway side of the stand-in; `FakeDiscord` supplies READY's payloads and the token."""

    def __init__(
        self,
        *,
        token_is_valid: Callable[[str], bool],
        ready_payloads: Callable[[GatewaySession, str], list[tuple[str, dict[str, Any]]]],
        on_change: Callable[[], Awaitable[None]],
    ) -> None:
        self.connections: list[Connection] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        # Privileged intents the application has enabled in the Developer Portal.
        self.enabled_intents = PRIVILEGED_INTENTS
        self.connected = asyncio.Event()
        self.resumed = asyncio.Event()
        # The latest session of each shard id.
        self.sessions: dict[int, GatewaySession] = {}
        self._live: dict[int, Connection] = {}
        self._token_is_valid = token_is_valid
        self._ready_payloads = ready_payloads
        self._on_change = on_change
        self._session_ids = itertools.count(1)
        self.base_url = ""

    @property
    def url(self) -> str:
        return f"{self.base_url.replace('http://', 'ws://')}/gateway"

    @property
    def resume_url(self) -> str:
        return f"{self.base_url.replace('http://', 'ws://')}/gateway-resume"

    @property
    def session(self) -> GatewaySession | None:
        """The session of shard 0 (the only one of an unsharded client)."""
        return self.sessions.get(0)

    def open_shards(self) -> list[tuple[int, int]]:
        return sorted(session.shard for session in self.sessions.values() if session.open)

    @property
    def client_close_codes(self) -> list[int | None]:
        return [c.close_code for c in self.connections if c.closed_by_server is None and c.socket.closed]

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._serve)
        app.router.add_get("/gateway-resume", self._serve)

    # --- what tests do -------------------------------------------------------------

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """An event for the shard its guild belongs to; a client that is away gets it on RESUME."""
        counts = {session.shard[1] for session in self.sessions.values() if session.open}
        assert counts, "no gateway session"
        guild_id = data.get("guild_id")
        shard = shard_of(int(guild_id) if guild_id is not None else None, max(counts))
        session = self.sessions.get(shard)
        assert session is not None and session.open, f"no gateway session for shard {shard}"
        await self._dispatch_to(session, event, data)

    async def _dispatch_to(self, session: GatewaySession, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(payload)
        live = self._live.get(session.shard[0])
        if live is not None and live.session is session:
            await live.send(payload)

    async def request_reconnect(self, shard: int = 0) -> None:
        """Op 7: the client should reconnect and resume."""
        live = self._take_live(shard)
        await live.send({"op": 7, "d": None})

    async def invalidate_session(self, *, resumable: bool, shard: int = 0) -> None:
        """Op 9; a session that is not resumable is gone."""
        live = self._take_live(shard)
        if not resumable and live.session is not None:
            live.session.open = False
        await live.send({"op": 9, "d": resumable})

    async def close(self, code: int, reason: str = "", shard: int = 0) -> None:
        """The server closes the live connection with `code` (4000 lets the client resume)."""
        live = self._take_live(shard)
        live.closed_by_server = code
        await live.socket.close(code=code, message=reason.encode())

    async def stop(self) -> None:
        for connection in self.connections:
            if not connection.socket.closed:
                await connection.socket.close(code=WSCloseCode.GOING_AWAY)

    def _take_live(self, shard: int) -> Connection:
        live = self._live.pop(shard, None)
        assert live is not None, "no client connected to the gateway"
        return live

    # --- protocol ------------------------------------------------------------------

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        compress = request.query.get("compress")
        if request.query.get("v") != "10" or request.query.get("encoding", "json") != "json":
            return web.Response(status=400, text="unsupported gateway version or encoding")
        if compress not in CODECS:
            return web.Response(status=400, text=f"unknown compress={compress}")
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        connection = Connection(socket, CODECS[compress](), request.path, compress)
        self.connections.append(connection)
        await connection.send({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}})
        try:
            async for frame in socket:
                if frame.type != WSMsgType.TEXT:
                    break
                await self._receive(connection, json.loads(frame.data))
        finally:
            connection.close_code = socket.close_code
            for shard, live in list(self._live.items()):
                if live is connection:
                    del self._live[shard]
            await self._on_change()
        return socket

    async def _receive(self, connection: Connection, payload: dict[str, Any]) -> None:
        op, data = payload["op"], payload.get("d")
        if op == 1:
            connection.heartbeats += 1
            await connection.send({"op": 11})
        elif op == 2:
            await self._identify(connection, data)
        elif op == 6:
            await self._resume(connection, data)

    async def _identify(self, connection: Connection, data: dict[str, Any]) -> None:
        self.identifies.append(data)
        if not self._token_is_valid(data["token"]):
            await self._refuse(connection, 4004, "Authentication failed.")
            return
        if data["intents"] & PRIVILEGED_INTENTS & ~self.enabled_intents:
            await self._refuse(connection, 4014, "Disallowed intent(s).")
            return
        shard_id, shard_count = data.get("shard") or (0, 1)
        if not 0 <= shard_id < shard_count:
            await self._refuse(connection, 4010, "Invalid shard.")
            return
        previous = self.sessions.get(shard_id)
        if previous is not None:
            previous.open = False
        session = GatewaySession(id=f"session-{next(self._session_ids)}", shard=(shard_id, shard_count))
        self.sessions[shard_id] = session
        connection.session = session
        self._live[shard_id] = connection
        for event, body in self._ready_payloads(session, self.resume_url):
            await self._dispatch_to(session, event, body)
        self.connected.set()
        await self._on_change()

    async def _resume(self, connection: Connection, data: dict[str, Any]) -> None:
        self.resumes.append(data)
        if not self._token_is_valid(data["token"]):
            await self._refuse(connection, 4004, "Authentication failed.")
            return
        session = next((known for known in self.sessions.values() if known.id == data["session_id"]), None)
        if session is None or not session.open:
            await connection.send({"op": 9, "d": False})
            return
        connection.session = session
        self._live[session.shard[0]] = connection
        for payload in session.events:
            if payload["s"] > (data["seq"] or 0):
                await connection.send(payload)
        await self._dispatch_to(session, "RESUMED", {})
        self.resumed.set()
        await self._on_change()

    async def _refuse(self, connection: Connection, code: int, reason: str) -> None:
        connection.closed_by_server = code
        await connection.socket.close(code=code, message=reason.encode())
