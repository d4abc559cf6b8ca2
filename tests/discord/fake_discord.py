"""Discord's gateway and REST API on 127.0.0.1, just enough for a real discord.py 2 client.

    async with FakeDiscord() as discord_server:
        monkeypatch.setattr(discord.http.Route, "BASE", discord_server.api_base)
        monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(discord_server.gateway_url))
        ... start the lane ...
        await discord_server.connected.wait()
        await discord_server.post_message(CHANNEL_ID, "<@BOT> hi", mentions=[BOT])
        await discord_server.wait_until(lambda: discord_server.texts_in(CHANNEL_ID) == ["..."])

The gateway speaks uncompressed JSON text frames (discord.py only inflates binary frames):
HELLO, then READY + GUILD_CREATE after IDENTIFY, heartbeats acknowledged, and whatever events
a test dispatches. REST answers with complete payloads and exactly `Content-Type:
application/json`, which is what discord.py checks before parsing a body. Every REST call is
recorded; messages the bot sends keep their edit history.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.support.local_server import LocalServer

APPLICATION_ID = 1100000000000000001
GUILD_ID = 1100000000000000010
CHANNEL_ID = 1100000000000000020
THREAD_ID = 1100000000000000030
DM_CHANNEL_ID = 1100000000000000040
TIMESTAMP = "2025-01-01T00:00:00.000000+00:00"
VALID_TOKEN = "test-token"

BOT = {
    "id": "1100000000000000100",
    "username": "chorus",
    "global_name": "Chorus",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
    "flags": 0,
}
ALICE = {
    "id": "1100000000000000200",
    "username": "alice",
    "global_name": "Alice",
    "discriminator": "0",
    "avatar": None,
}
BOB = {
    "id": "1100000000000000300",
    "username": "bob",
    "global_name": "Bob",
    "discriminator": "0",
    "avatar": None,
}
OTHER_BOT = {
    "id": "1100000000000000400",
    "username": "helperbot",
    "global_name": "Helper",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
}


@dataclass
class RestCall:
    method: str
    path: str
    query: dict[str, str]
    json: Any


@dataclass
class SentMessage:
    """A message the bot created; `versions` holds its content after each create/edit."""

    id: int
    channel_id: int
    reference_id: int | None
    versions: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.versions[-1]


@dataclass
class Interaction:
    id: int
    token: str
    channel_id: int
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    followups: list[str] = field(default_factory=list)


class FakeDiscord(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[RestCall] = []
        self.sent: list[SentMessage] = []
        self.interactions: dict[str, Interaction] = {}
        self.registered_commands: list[dict[str, Any]] = []
        self.identify: dict[str, Any] | None = None
        self.connected = asyncio.Event()
        # The close code of each gateway connection the client ended (1000: a clean close).
        self.close_codes: list[int | None] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self._ids = itertools.count(1200000000000000000)
        self._sequence = itertools.count(1)
        self._socket: web.WebSocketResponse | None = None
        self._changed = asyncio.Condition()
        self._rate_limit_edits: list[float] = []

    # --- lifecycle ---------------------------------------------------------------

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"{self.base_url.replace('http://', 'ws://')}/gateway"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/files/{name}", self._file)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)

    async def before_stop(self) -> None:
        if self._socket is not None:
            await self._socket.close()

    # --- what tests do -------------------------------------------------------------

    def rate_limit_next_edit(self, retry_after: float) -> None:
        """The next message edit is answered with one 429 carrying `retry_after` seconds."""
        self._rate_limit_edits.append(retry_after)

    def add_file(self, name: str, content_type: str, data: bytes) -> dict[str, Any]:
        """Serve `data` as an attachment; returns the attachment payload for a message."""
        self.files[name] = (content_type, data)
        url = f"{self.base_url}/files/{name}"
        return {
            "id": str(next(self._ids)),
            "filename": name,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }

    async def post_message(
        self,
        channel_id: int,
        content: str,
        *,
        author: dict[str, Any] = ALICE,
        nick: str | None = None,
        mentions: tuple[dict[str, Any], ...] = (),
        attachments: tuple[dict[str, Any], ...] = (),
        replying_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A user's message arriving as MESSAGE_CREATE; DMs when `channel_id` is the DM channel."""
        payload = self.message_payload(
            channel_id, content, author=author, nick=nick, mentions=mentions, attachments=attachments
        )
        if replying_to is not None:
            payload["type"] = 19
            payload["message_reference"] = {
                "type": 0,
                "message_id": replying_to["id"],
                "channel_id": replying_to["channel_id"],
                **({"guild_id": str(GUILD_ID)} if "guild_id" in payload else {}),
            }
            payload["referenced_message"] = replying_to
        await self.dispatch("MESSAGE_CREATE", payload)
        return payload

    async def run_slash_command(
        self, name: str, args: str | None, *, channel_id: int = CHANNEL_ID, user: dict[str, Any] = ALICE
    ) -> Interaction:
        """A user invoking `/name args` as an application command (INTERACTION_CREATE)."""
        interaction = Interaction(
            id=next(self._ids), token=f"interaction-token-{next(self._ids)}", channel_id=channel_id
        )
        self.interactions[interaction.token] = interaction
        registered = next(c for c in self.registered_commands if c["name"] == name)
        options = [{"name": "args", "type": 3, "value": args}] if args is not None else []
        payload: dict[str, Any] = {
            "id": str(interaction.id),
            "application_id": str(APPLICATION_ID),
            "type": 2,
            "token": interaction.token,
            "version": 1,
            "channel_id": str(channel_id),
            "channel": self._channel_payload(channel_id),
            "data": {"id": registered["id"], "name": name, "type": 1, "options": options},
            "locale": "en-US",
            "app_permissions": "0",
            "entitlements": [],
            "attachment_size_limit": 10 * 1024 * 1024,
            "authorizing_integration_owners": {},
        }
        if channel_id == DM_CHANNEL_ID:
            payload["user"] = user
            payload["context"] = 1
        else:
            payload["guild_id"] = str(GUILD_ID)
            payload["member"] = {**self._member(None), "user": user, "permissions": "0"}
            payload["context"] = 0
        await self.dispatch("INTERACTION_CREATE", payload)
        return interaction

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        assert self._socket is not None, "no client connected to the gateway"
        await self._socket.send_str(json.dumps({"op": 0, "t": event, "s": next(self._sequence), "d": data}))

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until `condition()` holds; it is checked after every REST call."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            sent = [(message.channel_id, message.text) for message in self.sent]
            raise AssertionError(f"condition not met in {timeout}s; the bot sent {sent}") from None

    async def wait_for_texts(self, channel_id: int, expected: list[str], timeout: float = 5.0) -> None:
        """Wait until the bot's messages in the channel read exactly `expected` (edits done)."""
        await self.wait_until(lambda: self.texts_in(channel_id) == expected, timeout)

    def sent_in(self, channel_id: int) -> list[SentMessage]:
        return [message for message in self.sent if message.channel_id == channel_id]

    def texts_in(self, channel_id: int) -> list[str]:
        return [message.text for message in self.sent_in(channel_id)]

    def calls_to(self, method: str, suffix: str) -> list[RestCall]:
        return [c for c in self.calls if c.method == method and c.path.endswith(suffix)]

    # --- payloads ------------------------------------------------------------------

    def message_payload(
        self,
        channel_id: int,
        content: str,
        *,
        author: dict[str, Any],
        nick: str | None = None,
        mentions: tuple[dict[str, Any], ...] = (),
        attachments: tuple[dict[str, Any], ...] = (),
        message_id: int | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": str(message_id or next(self._ids)),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": TIMESTAMP,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": list(mentions),
            "mention_roles": [],
            "attachments": list(attachments),
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        if channel_id != DM_CHANNEL_ID:
            payload["guild_id"] = str(GUILD_ID)
            payload["member"] = self._member(nick)
        return payload

    def _member(self, nick: str | None) -> dict[str, Any]:
        return {"roles": [], "joined_at": TIMESTAMP, "deaf": False, "mute": False, "flags": 0, "nick": nick}

    def _channel_payload(self, channel_id: int) -> dict[str, Any]:
        if channel_id == DM_CHANNEL_ID:
            return {"id": str(DM_CHANNEL_ID), "type": 1, "recipients": [ALICE], "last_message_id": None}
        if channel_id == THREAD_ID:
            return {
                "id": str(THREAD_ID),
                "type": 11,
                "guild_id": str(GUILD_ID),
                "parent_id": str(CHANNEL_ID),
                "owner_id": ALICE["id"],
                "name": "release plans",
                "message_count": 0,
                "member_count": 1,
                "rate_limit_per_user": 0,
                "last_message_id": None,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": TIMESTAMP,
                    "locked": False,
                },
            }
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(GUILD_ID),
            "name": "general",
            "position": 0,
            "permission_overwrites": [],
            "parent_id": None,
            "nsfw": False,
            "topic": None,
            "rate_limit_per_user": 0,
            "last_message_id": None,
        }

    def _guild_payload(self) -> dict[str, Any]:
        return {
            "id": str(GUILD_ID),
            "name": "Chorus testers",
            "icon": None,
            "owner_id": ALICE["id"],
            "unavailable": False,
            "member_count": 3,
            "large": False,
            "joined_at": TIMESTAMP,
            "features": [],
            "premium_tier": 0,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "preferred_locale": "en-US",
            "system_channel_flags": 0,
            "roles": [
                {
                    "id": str(GUILD_ID),
                    "name": "@everyone",
                    "permissions": str((1 << 41) - 1),
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "channels": [self._channel_payload(CHANNEL_ID)],
            "threads": [self._channel_payload(THREAD_ID)],
            "members": [{**self._member(None), "user": BOT}],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    # --- gateway -------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket_response = web.WebSocketResponse()
        await socket_response.prepare(request)
        self._socket = socket_response
        await socket_response.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        async for frame in socket_response:
            if frame.type != WSMsgType.TEXT:
                break
            payload = json.loads(frame.data)
            if payload["op"] == 1:
                await socket_response.send_str(json.dumps({"op": 11, "d": None}))
            elif payload["op"] == 2:
                self.identify = payload["d"]
                await self.dispatch("READY", self._ready_payload())
                await self.dispatch("GUILD_CREATE", self._guild_payload())
                self.connected.set()
        self.close_codes.append(socket_response.close_code)
        return socket_response

    def _ready_payload(self) -> dict[str, Any]:
        return {
            "v": 10,
            "user": BOT,
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": "fake-session",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(APPLICATION_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }

    # --- REST ----------------------------------------------------------------------

    async def _file(self, request: web.Request) -> web.Response:
        content_type, data = self.files[request.match_info["name"]]
        return web.Response(body=data, headers={"Content-Type": content_type})

    async def _rest(self, request: web.Request) -> web.Response:
        body = await request.read()
        parsed = json.loads(body) if body and request.content_type == "application/json" else None
        path = "/" + request.match_info["path"]
        call = RestCall(request.method, path, dict(request.query), parsed)
        self.calls.append(call)
        try:
            # Interaction callbacks and followups are authorised by the token in their URL.
            by_url = path.startswith(("/interactions/", "/webhooks/"))
            if not by_url and request.headers.get("Authorization") != f"Bot {VALID_TOKEN}":
                return _json({"message": "401: Unauthorized", "code": 0}, status=401)
            return self._answer(call)
        finally:
            async with self._changed:
                self._changed.notify_all()

    def _answer(self, call: RestCall) -> web.Response:
        parts = call.path.strip("/").split("/")
        match call.method, parts:
            case "GET", ["users", "@me"]:
                return _json(BOT)
            case "GET", ["oauth2", "applications", "@me"]:
                return _json(self._application())
            case "PUT", ["applications", _, "commands"]:
                self.registered_commands = [
                    {
                        **command,
                        "id": str(next(self._ids)),
                        "application_id": str(APPLICATION_ID),
                        "version": "1",
                        "default_member_permissions": None,
                        "type": command.get("type", 1),
                    }
                    for command in call.json
                ]
                return _json(self.registered_commands)
            case "GET", ["channels", channel_id]:
                return _json(self._channel_payload(int(channel_id)))
            case "POST", ["channels", _, "typing"]:
                return _no_content()
            case "POST", ["channels", channel_id, "messages"]:
                return _json(self._create(int(channel_id), call.json))
            case "PATCH", ["channels", channel_id, "messages", message_id]:
                if self._rate_limit_edits:
                    return _rate_limited(self._rate_limit_edits.pop(0))
                return _json(self._edit(int(channel_id), int(message_id), call.json["content"]))
            case "POST", ["interactions", interaction_id, token, "callback"]:
                self.interactions[token].callbacks.append(call.json)
                return _json(
                    {
                        "interaction": {
                            "id": interaction_id,
                            "type": 2,
                            "response_message_loading": call.json["type"] == 5,
                            "response_message_ephemeral": False,
                        },
                        "resource": {"type": call.json["type"]},
                    }
                )
            case "POST", ["webhooks", _, token]:
                interaction = self.interactions[token]
                interaction.followups.append(call.json["content"])
                return _json(
                    self.message_payload(interaction.channel_id, call.json["content"], author=BOT)
                    | {"webhook_id": str(APPLICATION_ID)}
                )
            case "DELETE", ["webhooks", _, _, "messages", "@original"]:
                return _no_content()
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _application(self) -> dict[str, Any]:
        return {
            "id": str(APPLICATION_ID),
            "name": "Chorus",
            "description": "",
            "icon": None,
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": ALICE,
            "verify_key": "0" * 64,
            "flags": 0,
            "summary": "",
        }

    def _create(self, channel_id: int, body: dict[str, Any]) -> dict[str, Any]:
        reference = body.get("message_reference")
        message = SentMessage(
            id=next(self._ids),
            channel_id=channel_id,
            reference_id=int(reference["message_id"]) if reference else None,
            versions=[body["content"]],
        )
        self.sent.append(message)
        return self.message_payload(channel_id, body["content"], author=BOT, message_id=message.id)

    def _edit(self, channel_id: int, message_id: int, content: str) -> dict[str, Any]:
        message = next(m for m in self.sent if m.id == message_id)
        message.versions.append(content)
        payload = self.message_payload(channel_id, content, author=BOT, message_id=message_id)
        return payload | {"edited_timestamp": TIMESTAMP}


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _no_content() -> web.Response:
    return web.Response(status=204)


def _rate_limited(retry_after: float) -> web.Response:
    # discord.py treats a 429 without `Via` as a Cloudflare ban and gives up.
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
    return _json(body, status=429, headers={"Via": "1.1 google", "X-RateLimit-Scope": "user"})
