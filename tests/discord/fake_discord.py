"""Discord's gateway and REST API on 127.0.0.1, for a real discord.py 2 client.

    async with FakeDiscord() as discord_server:
        ... start the lane with channels.discord.api_base / gateway_url from the server ...
        await discord_server.connected.wait()
        await discord_server.post_message(CHANNEL_ID, "<@BOT> hi", mentions=[BOT])
        await discord_server.wait_until(lambda: discord_server.texts_in(CHANNEL_ID) == ["..."])

Written from Discord's documentation, not from Chorus's code. The gateway (`fake_gateway.py`)
speaks zlib-stream or zstd-stream, RESUME, op 7/9 and close codes. REST answers with complete
payloads, exactly `Content-Type: application/json` and the rate-limit headers on every
response (a 429 carries `retry_after`, `Retry-After` and the `X-RateLimit-*` headers); a
message that was deleted answers edits with 404 and JSON code 10008 "Unknown Message".
Channel webhooks need the bot's Manage Webhooks permission (403, code 50013 without it),
cannot live on threads (a thread is reached through its parent's webhook and `thread_id`),
and execute with `username` / `avatar_url`; application-owned webhooks may send components.
Message components (buttons) can be clicked, which sends a MESSAGE_COMPONENT interaction.
People's voice messages carry flag 8192 and an OGG attachment with `duration_secs` and a
`waveform`; files the bot uploads (multipart `files[n]`) are kept with the message, typed by
their extension as Discord does, and more than 10 MB is refused (413, code 40005).
Every REST call is recorded; messages keep their edit history. Messages the bot creates,
edits or deletes are dispatched back to it, as Discord does.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import mimetypes
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

from aiohttp import web

from tests.discord.fake_gateway import FakeGateway, GatewaySession, shard_of
from tests.support.local_server import LocalServer

APPLICATION_ID = 1100000000000000001
GUILD_ID = 1100000000000000010
BOT_ROLE_ID = 1100000000000000011
CHANNEL_ID = 1100000000000000020
THREAD_ID = 1100000000000000030
DM_CHANNEL_ID = 1100000000000000040
# A second server, for sharding: with two shards its events go to shard 0, GUILD_ID's to shard 1
# (a guild's shard is (guild_id >> 22) % shard_count).
SECOND_GUILD_ID = GUILD_ID + (1 << 22)
SECOND_BOT_ROLE_ID = 1100000000000000051
SECOND_CHANNEL_ID = 1100000000000000060
TIMESTAMP = "2025-01-01T00:00:00.000000+00:00"
VALID_TOKEN = "test-token"
DEFAULT_TIMEOUT = 60.0

# Permission bits (https://discord.com/developers/docs/topics/permissions).
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
MANAGE_WEBHOOKS = 1 << 29
SEND_MESSAGES_IN_THREADS = 1 << 38
EVERYONE_PERMISSIONS = VIEW_CHANNEL | SEND_MESSAGES | EMBED_LINKS | ATTACH_FILES | READ_MESSAGE_HISTORY
EVERYONE_PERMISSIONS |= SEND_MESSAGES_IN_THREADS

# Discord's JSON error codes used here.
UNKNOWN_MESSAGE = 10008
UNKNOWN_WEBHOOK = 10015
MISSING_PERMISSIONS = 50013
WRONG_CHANNEL_TYPE = 50024
INVALID_FORM_BODY = 50035
REQUEST_TOO_LARGE = 40005
# Message flag of a voice message (https://discord.com/developers/docs/resources/message).
VOICE_MESSAGE_FLAG = 1 << 13
# What a bot may upload in one message outside boosted servers.
UPLOAD_LIMIT_BYTES = 10 * 1024 * 1024
# Webhook names and usernames Discord refuses.
FORBIDDEN_NAME_PARTS = ("clyde", "discord")

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


@dataclass(frozen=True)
class Guild:
    id: int
    name: str
    # The role Discord made for the bot when it joined this server.
    bot_role_id: int
    channels: tuple[int, ...]
    threads: tuple[int, ...] = ()


GUILDS = (
    Guild(GUILD_ID, "Chorus testers", BOT_ROLE_ID, (CHANNEL_ID,), (THREAD_ID,)),
    Guild(SECOND_GUILD_ID, "Second server", SECOND_BOT_ROLE_ID, (SECOND_CHANNEL_ID,)),
)


def guild_of(channel_id: int) -> Guild | None:
    """The server a channel or thread belongs to; None for the DM channel."""
    return next((g for g in GUILDS if channel_id in g.channels or channel_id in g.threads), None)


def guild_of_role(role_id: int) -> bool:
    """Whether `role_id` is a server's @everyone role (its id is the server's)."""
    return any(guild.id == role_id for guild in GUILDS)


def guild_id_of(channel_id: int) -> str:
    guild = guild_of(channel_id)
    assert guild is not None, f"channel {channel_id} is not in a server"
    return str(guild.id)


@dataclass(frozen=True)
class UploadedFile:
    """A file part of a multipart request (`files[n]`), as Discord stores it."""

    filename: str
    content_type: str
    data: bytes


@dataclass
class RestCall:
    method: str
    path: str
    query: dict[str, str]
    json: Any
    status: int = 0
    files: list[UploadedFile] = field(default_factory=list)


@dataclass
class SentMessage:
    """A message the bot created (itself or through a webhook).

    `versions` holds its content after each create/edit; `username`/`avatar_url` are the
    name and avatar a webhook posted it under.
    """

    id: int
    channel_id: int
    reference_id: int | None
    versions: list[str] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    webhook_id: int | None = None
    username: str | None = None
    avatar_url: str | None = None
    deleted: bool = False
    files: list[UploadedFile] = field(default_factory=list)
    # The files as attachments of the message, served like a person's.
    attachments: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.versions[-1]


@dataclass
class Webhook:
    id: int
    token: str
    channel_id: int
    name: str
    application_id: int | None = APPLICATION_ID


@dataclass
class Interaction:
    id: int
    token: str
    channel_id: int
    # The message a clicked component is on.
    message_id: int | None = None
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    followups: list[str] = field(default_factory=list)


@dataclass
class Bucket:
    """A rate-limit bucket: `limit` requests per `window` seconds."""

    name: str
    remaining: int
    resets_at: float


class FakeDiscord(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[RestCall] = []
        self.sent: list[SentMessage] = []
        self.webhooks: list[Webhook] = []
        self.interactions: dict[str, Interaction] = {}
        self.registered_commands: list[dict[str, Any]] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        # The bot's managed role grants Manage Webhooks unless a test takes it away.
        self.manage_webhooks = True
        # Other ways an admin grants it: channels whose overwrites allow it for the bot's role,
        # and further roles of a server (id → name, permissions) given to the bot.
        self.webhooks_allowed_in: set[int] = set()
        self.server_roles: dict[int, dict[int, tuple[str, int]]] = {}
        self.extra_bot_roles: dict[int, list[int]] = {}
        # Requests per bucket and window, as Discord reports in X-RateLimit-*.
        self.rate_limit = (50, 1.0)
        self.token = VALID_TOKEN
        # Status codes the next REST calls get instead of an answer (an outage).
        self.failures: list[int] = []
        # While set, REST calls get no answer at all (a network that swallows packets).
        self.silent = False
        self._ids = itertools.count(1200000000000000000)
        self._changed = asyncio.Condition()
        self._rate_limit_edits: list[float] = []
        self._buckets: dict[str, Bucket] = {}
        self.gateway = FakeGateway(
            token_is_valid=lambda token: token == self.token,
            ready_payloads=self._ready_events,
            on_change=self._notify,
        )

    # --- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        await super().start()
        self.gateway.base_url = self.base_url

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return self.gateway.url

    @property
    def connected(self) -> asyncio.Event:
        return self.gateway.connected

    @property
    def close_codes(self) -> list[int | None]:
        """The close code of each gateway connection the client ended (1000: a clean close)."""
        return self.gateway.client_close_codes

    @property
    def identify(self) -> dict[str, Any] | None:
        return self.gateway.identifies[-1] if self.gateway.identifies else None

    def routes(self, app: web.Application) -> None:
        self.gateway.routes(app)
        app.router.add_get("/files/{name}", self._file)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)

    async def before_stop(self) -> None:
        await self.gateway.stop()

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

    def add_voice_message(self, data: bytes, duration_secs: float) -> dict[str, Any]:
        """A voice message recorded in the Discord app: an OGG/Opus file with its length and waveform.

        Post it with `flags=VOICE_MESSAGE_FLAG` and no content, as the app does.
        """
        name = f"voice-message-{next(self._ids)}.ogg"
        waveform = base64.b64encode(bytes(range(0, 256, 4))).decode()
        return self.add_file(name, "audio/ogg", data) | {
            "filename": "voice-message.ogg",
            "duration_secs": duration_secs,
            "waveform": waveform,
        }

    async def post_message(
        self,
        channel_id: int,
        content: str,
        *,
        author: dict[str, Any] = ALICE,
        nick: str | None = None,
        mentions: tuple[dict[str, Any], ...] = (),
        mention_roles: tuple[int, ...] = (),
        attachments: tuple[dict[str, Any], ...] = (),
        replying_to: dict[str, Any] | None = None,
        flags: int = 0,
    ) -> dict[str, Any]:
        """A user's message arriving as MESSAGE_CREATE; DMs when `channel_id` is the DM channel."""
        payload = self.message_payload(
            channel_id, content, author=author, nick=nick, mentions=mentions, attachments=attachments
        )
        payload["mention_roles"] = [str(role) for role in mention_roles]
        payload["flags"] = flags
        if replying_to is not None:
            payload["type"] = 19
            payload["message_reference"] = {
                "type": 0,
                "message_id": replying_to["id"],
                "channel_id": replying_to["channel_id"],
                **({"guild_id": payload["guild_id"]} if "guild_id" in payload else {}),
            }
            payload["referenced_message"] = replying_to
        await self.dispatch("MESSAGE_CREATE", payload)
        return payload

    async def edit_with_null_member(self, channel_id: int = CHANNEL_ID) -> dict[str, Any]:
        """A webhook message's edit in a server channel as some gateway stand-ins send it,
        with `"member": null`: discord.py 2.7's MESSAGE_UPDATE parser raises TypeError on it."""
        payload = self.message_payload(channel_id, "edited", author={**ALICE, "bot": True})
        payload["webhook_id"] = str(next(self._ids))
        payload["edited_timestamp"] = TIMESTAMP
        payload["member"] = None
        await self.dispatch("MESSAGE_UPDATE", payload)
        return payload

    async def delete_message(self, message_id: int) -> None:
        """Someone (a moderator, the author) deletes one of the bot's messages."""
        message = self.message(message_id)
        message.deleted = True
        await self.dispatch("MESSAGE_DELETE", self._located({"id": str(message.id)}, message.channel_id))

    async def run_slash_command(
        self, name: str, args: str | None, *, channel_id: int = CHANNEL_ID, user: dict[str, Any] = ALICE
    ) -> Interaction:
        """A user invoking `/name args` as an application command (INTERACTION_CREATE)."""
        registered = next(c for c in self.registered_commands if c["name"] == name)
        options = [{"name": "args", "type": 3, "value": args}] if args is not None else []
        data = {"id": registered["id"], "name": name, "type": 1, "options": options}
        return await self._interact(2, data, channel_id=channel_id, user=user)

    async def click(self, message_id: int, custom_id: str, *, user: dict[str, Any] = ALICE) -> Interaction:
        """A user presses a button on one of the bot's messages (MESSAGE_COMPONENT)."""
        message = self.message(message_id)
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._interact(
            3, data, channel_id=message.channel_id, user=user, message=self.payload_of(message)
        )

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        await self.gateway.dispatch(event, data)

    async def wait_until(self, condition: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until `condition()` holds; it is checked after every REST call and gateway change."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            sent = [(message.channel_id, message.text) for message in self.sent]
            raise AssertionError(f"condition not met in {timeout}s; the bot sent {sent}") from None

    async def wait_for_texts(
        self, channel_id: int, expected: list[str], timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Wait until the bot's messages in the channel read exactly `expected` (edits done)."""
        await self.wait_until(lambda: self.texts_in(channel_id) == expected, timeout)

    def message(self, message_id: int) -> SentMessage:
        return next(m for m in self.sent if m.id == message_id)

    def sent_in(self, channel_id: int) -> list[SentMessage]:
        return [message for message in self.sent if message.channel_id == channel_id and not message.deleted]

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
            payload["guild_id"] = guild_id_of(channel_id)
            if not author.get("bot"):
                payload["member"] = self._member(nick)
        return payload

    def payload_of(self, message: SentMessage) -> dict[str, Any]:
        author = BOT
        if message.webhook_id is not None:
            author = {
                "id": str(message.webhook_id),
                "username": message.username,
                "avatar": None,
                "discriminator": "0000",
                "bot": True,
            }
        payload = self.message_payload(
            message.channel_id,
            message.text,
            author=author,
            message_id=message.id,
            attachments=tuple(message.attachments),
        )
        payload["components"] = message.components
        if len(message.versions) > 1:
            payload["edited_timestamp"] = TIMESTAMP
        if message.webhook_id is not None:
            payload["webhook_id"] = str(message.webhook_id)
            payload["application_id"] = str(APPLICATION_ID)
        if message.reference_id is not None:
            payload["type"] = 19
            reference = {"message_id": str(message.reference_id)}
            payload["message_reference"] = self._located(reference, message.channel_id)
        return payload

    def _located(self, body: dict[str, Any], channel_id: int) -> dict[str, Any]:
        located = {**body, "channel_id": str(channel_id)}
        if channel_id != DM_CHANNEL_ID:
            located["guild_id"] = guild_id_of(channel_id)
        return located

    def _member(self, nick: str | None, roles: tuple[int, ...] = ()) -> dict[str, Any]:
        return {
            "roles": [str(role) for role in roles],
            "joined_at": TIMESTAMP,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "nick": nick,
        }

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
            "guild_id": guild_id_of(channel_id),
            "name": "general",
            "position": 0,
            "permission_overwrites": self._overwrites(channel_id),
            "parent_id": None,
            "nsfw": False,
            "topic": None,
            "rate_limit_per_user": 0,
            "last_message_id": None,
        }

    def _overwrites(self, channel_id: int) -> list[dict[str, Any]]:
        if channel_id not in self.webhooks_allowed_in:
            return []
        guild = next(guild for guild in GUILDS if channel_id in guild.channels)
        return [{"id": str(guild.bot_role_id), "type": 0, "allow": str(MANAGE_WEBHOOKS), "deny": "0"}]

    def _bot_role(self, guild: Guild) -> dict[str, Any]:
        # Discord gives every bot a managed role named after it, with its invite permissions.
        return self._role(
            guild.bot_role_id, "Chorus", self._bot_permissions(), managed=True, tags={"bot_id": BOT["id"]}
        )

    def _role(self, role_id: int, name: str, permissions: int, **extra: Any) -> dict[str, Any]:
        return {
            "id": str(role_id),
            "name": name,
            "permissions": str(permissions),
            "position": 0 if guild_of_role(role_id) else 1,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
            **extra,
        }

    def _bot_permissions(self) -> int:
        return EVERYONE_PERMISSIONS | (MANAGE_WEBHOOKS if self.manage_webhooks else 0)

    def _guild_payload(self, guild: Guild) -> dict[str, Any]:
        return {
            "id": str(guild.id),
            "name": guild.name,
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
                self._role(guild.id, "@everyone", EVERYONE_PERMISSIONS),
                self._bot_role(guild),
                *(
                    self._role(role_id, name, permissions)
                    for role_id, (name, permissions) in self.server_roles.get(guild.id, {}).items()
                ),
            ],
            "emojis": [],
            "stickers": [],
            "channels": [self._channel_payload(channel) for channel in guild.channels],
            "threads": [self._channel_payload(thread) for thread in guild.threads],
            "members": [self._bot_member(guild)],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _ready_events(self, session: GatewaySession, resume_url: str) -> list[tuple[str, dict[str, Any]]]:
        shard_id, shard_count = session.shard
        # A shard is told about the servers whose events it gets.
        guilds = [guild for guild in GUILDS if shard_of(guild.id, shard_count) == shard_id]
        ready = {
            "v": 10,
            "user": BOT,
            "guilds": [{"id": str(guild.id), "unavailable": True} for guild in guilds],
            "session_id": session.id,
            "resume_gateway_url": resume_url,
            "shard": [shard_id, shard_count],
            "application": {"id": str(APPLICATION_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }
        return [("READY", ready), *(("GUILD_CREATE", self._guild_payload(guild)) for guild in guilds)]

    async def _interact(
        self,
        kind: int,
        data: dict[str, Any],
        *,
        channel_id: int,
        user: dict[str, Any],
        message: dict[str, Any] | None = None,
    ) -> Interaction:
        interaction = Interaction(
            id=next(self._ids),
            token=f"interaction-token-{next(self._ids)}",
            channel_id=channel_id,
            message_id=int(message["id"]) if message is not None else None,
        )
        self.interactions[interaction.token] = interaction
        payload: dict[str, Any] = {
            "id": str(interaction.id),
            "application_id": str(APPLICATION_ID),
            "type": kind,
            "token": interaction.token,
            "version": 1,
            "channel_id": str(channel_id),
            "channel": self._channel_payload(channel_id),
            "data": data,
            "locale": "en-US",
            "app_permissions": str(self._bot_permissions()),
            "entitlements": [],
            "attachment_size_limit": 10 * 1024 * 1024,
            "authorizing_integration_owners": {},
        }
        if message is not None:
            payload["message"] = message
        if channel_id == DM_CHANNEL_ID:
            payload["user"] = user
            payload["context"] = 1
        else:
            payload["guild_id"] = guild_id_of(channel_id)
            payload["member"] = {**self._member(None), "user": user, "permissions": str(EVERYONE_PERMISSIONS)}
            payload["context"] = 0
        await self.dispatch("INTERACTION_CREATE", payload)
        return interaction

    # --- REST ----------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _file(self, request: web.Request) -> web.Response:
        content_type, data = self.files[request.match_info["name"]]
        return web.Response(body=data, headers={"Content-Type": content_type})

    async def _rest(self, request: web.Request) -> web.Response:
        body = await request.read()
        parsed = json.loads(body) if body and request.content_type == "application/json" else None
        files: list[UploadedFile] = []
        if request.content_type.startswith("multipart/"):
            parsed, files = _multipart(request, body)
        path = "/" + request.match_info["path"]
        call = RestCall(request.method, path, dict(request.query), parsed, files=files)
        self.calls.append(call)
        try:
            response = await self._respond(request, call)
            call.status = response.status
            return response
        finally:
            await self._notify()

    async def _respond(self, request: web.Request, call: RestCall) -> web.Response:
        while self.silent:
            await asyncio.sleep(0.05)
        if self.failures:
            status = self.failures.pop(0)
            return _json({"message": f"{status}: Server Error", "code": 0}, status=status)
        # Interaction callbacks and webhook executions are authorised by the token in their URL.
        by_url = call.path.startswith(("/interactions/", "/webhooks/"))
        if not by_url and request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        bucket = self._bucket(call)
        if bucket.remaining <= 0:
            return self._rate_limited(bucket, bucket.resets_at - time.monotonic())
        if call.method == "PATCH" and self._rate_limit_edits:
            return self._rate_limited(bucket, self._rate_limit_edits.pop(0))
        if sum(len(file.data) for file in call.files) > UPLOAD_LIMIT_BYTES:
            return _error(413, REQUEST_TOO_LARGE, "Request entity too large")
        bucket.remaining -= 1
        response = await self._answer(call)
        response.headers.update(self._rate_limit_headers(bucket))
        return response

    def _bucket(self, call: RestCall) -> Bucket:
        # Discord keys buckets by route and its major parameter (channel, guild, webhook).
        parts = call.path.strip("/").split("/")
        key = f"{call.method} {'/'.join(parts[:3])}"
        limit, window = self.rate_limit
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None or now >= bucket.resets_at:
            bucket = Bucket(name=f"bucket{abs(hash(key)) % 10**8}", remaining=limit, resets_at=now + window)
            self._buckets[key] = bucket
        return bucket

    def _rate_limit_headers(self, bucket: Bucket) -> dict[str, str]:
        reset_after = max(bucket.resets_at - time.monotonic(), 0.0)
        return {
            "X-RateLimit-Limit": str(self.rate_limit[0]),
            "X-RateLimit-Remaining": str(max(bucket.remaining, 0)),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": bucket.name,
        }

    def _rate_limited(self, bucket: Bucket, retry_after: float) -> web.Response:
        retry_after = max(retry_after, 0.0)
        body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
        headers = {
            **self._rate_limit_headers(bucket),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Scope": "user",
            "Retry-After": str(math.ceil(retry_after)),
            # Discord's API answers through Google's front end; discord.py reads a 429
            # without `Via` as a Cloudflare ban.
            "Via": "1.1 google",
        }
        return _json(body, status=429, headers=headers)

    async def _answer(self, call: RestCall) -> web.Response:
        parts = call.path.strip("/").split("/")
        match call.method, parts:
            case "GET", ["users", "@me"]:
                return _json(BOT)
            case "GET", ["oauth2", "applications", "@me"]:
                return _json(self._application())
            case "GET", ["gateway"] | ["gateway", "bot"]:
                return _json({"url": self.gateway_url})
            case "PUT", ["applications", _, "commands"]:
                return _json(self._register_commands(call.json))
            case "GET", ["channels", channel_id]:
                return _json(self._channel_payload(int(channel_id)))
            case "POST", ["channels", _, "typing"]:
                return _no_content()
            case "POST", ["channels", channel_id, "messages"]:
                return _json(await self._create(int(channel_id), call.json, files=call.files))
            case "GET", ["channels", channel_id, "messages", message_id]:
                if self._unknown_message(int(message_id), int(channel_id)):
                    return _error(404, UNKNOWN_MESSAGE, "Unknown Message")
                return _json(self.payload_of(self.message(int(message_id))))
            case "PATCH", ["channels", channel_id, "messages", message_id]:
                return await self._edit(int(channel_id), int(message_id), call.json)
            case "DELETE", ["channels", channel_id, "messages", message_id]:
                return await self._delete(int(channel_id), int(message_id))
            case "POST", ["channels", channel_id, "webhooks"]:
                return self._create_webhook(int(channel_id), call.json)
            case "GET", ["channels", channel_id, "webhooks"]:
                return self._list_webhooks(int(channel_id))
            case "POST", ["interactions", _, token, "callback"]:
                return await self._interaction_callback(token, call.json)
            case "POST", ["webhooks", _, token] if token in self.interactions:
                return self._followup(token, call.json)
            case "DELETE", ["webhooks", _, token, "messages", "@original"] if token in self.interactions:
                return _no_content()
            case "POST", ["webhooks", webhook_id, token]:
                return await self._execute_webhook(int(webhook_id), token, call)
            case "GET", ["webhooks", webhook_id, token, "messages", message_id]:
                return self._get_webhook_message(int(webhook_id), token, int(message_id), call)
            case "PATCH", ["webhooks", webhook_id, token, "messages", message_id]:
                return await self._edit_webhook_message(int(webhook_id), token, int(message_id), call)
            case "DELETE", ["webhooks", webhook_id, token, "messages", message_id]:
                webhook = self._webhook(int(webhook_id), token)
                if webhook is None:
                    return _error(404, UNKNOWN_WEBHOOK, "Unknown Webhook")
                return await self._delete(None, int(message_id))
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _register_commands(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.registered_commands = [
            {
                **command,
                "id": str(next(self._ids)),
                "application_id": str(APPLICATION_ID),
                "version": "1",
                "default_member_permissions": None,
                "type": command.get("type", 1),
            }
            for command in commands
        ]
        return self.registered_commands

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

    async def _create(
        self,
        channel_id: int,
        body: dict[str, Any],
        *,
        webhook: Webhook | None = None,
        username: str | None = None,
        avatar_url: str | None = None,
        files: list[UploadedFile] | None = None,
    ) -> dict[str, Any]:
        reference = body.get("message_reference")
        message = SentMessage(
            id=next(self._ids),
            channel_id=channel_id,
            reference_id=int(reference["message_id"]) if reference else None,
            versions=[body.get("content") or ""],
            components=body.get("components") or [],
            webhook_id=webhook.id if webhook else None,
            username=username,
            avatar_url=avatar_url,
            files=list(files or []),
        )
        message.attachments = [
            self.add_file(f"{message.id}-{file.filename}", file.content_type, file.data)
            for file in message.files
        ]
        self.sent.append(message)
        payload = self.payload_of(message)
        await self.dispatch("MESSAGE_CREATE", payload)
        return payload

    def _unknown_message(self, message_id: int, channel_id: int | None) -> bool:
        message = next((m for m in self.sent if m.id == message_id), None)
        if message is None or message.deleted:
            return True
        return channel_id is not None and message.channel_id != channel_id

    async def _edit(self, channel_id: int, message_id: int, body: dict[str, Any]) -> web.Response:
        if self._unknown_message(message_id, channel_id):
            return _error(404, UNKNOWN_MESSAGE, "Unknown Message")
        return _json(await self._apply_edit(self.message(message_id), body))

    async def _apply_edit(self, message: SentMessage, body: dict[str, Any]) -> dict[str, Any]:
        message.versions.append(body["content"] if body.get("content") is not None else message.text)
        if "components" in body:
            message.components = body["components"] or []
        payload = self.payload_of(message)
        await self.dispatch("MESSAGE_UPDATE", payload)
        return payload

    async def _delete(self, channel_id: int | None, message_id: int) -> web.Response:
        if self._unknown_message(message_id, channel_id):
            return _error(404, UNKNOWN_MESSAGE, "Unknown Message")
        await self.delete_message(message_id)
        return _no_content()

    # --- webhooks --------------------------------------------------------------------

    def _webhook_payload(self, webhook: Webhook) -> dict[str, Any]:
        return {
            "id": str(webhook.id),
            "type": 1,
            "guild_id": guild_id_of(webhook.channel_id),
            "channel_id": str(webhook.channel_id),
            "name": webhook.name,
            "avatar": None,
            "token": webhook.token,
            "application_id": str(webhook.application_id) if webhook.application_id else None,
            "user": BOT,
        }

    def _webhook_refusal(self, channel_id: int) -> web.Response | None:
        if channel_id in (THREAD_ID, DM_CHANNEL_ID):
            return _error(400, WRONG_CHANNEL_TYPE, "Cannot execute action on this channel type")
        guild_id = int(guild_id_of(channel_id))
        roles = self.server_roles.get(guild_id, {})
        granted = (
            self.manage_webhooks
            or channel_id in self.webhooks_allowed_in
            or any(roles[role][1] & MANAGE_WEBHOOKS for role in self.extra_bot_roles.get(guild_id, []))
        )
        return None if granted else _error(403, MISSING_PERMISSIONS, "Missing Permissions")

    # --- an admin changing the bot's permissions, and the events Discord sends for it ---

    async def grant_manage_webhooks_to_the_bot_role(self, guild: Guild) -> None:
        """Server settings → Roles → the bot's role → Manage Webhooks: GUILD_ROLE_UPDATE."""
        self.manage_webhooks = True
        await self.dispatch("GUILD_ROLE_UPDATE", {"guild_id": str(guild.id), "role": self._bot_role(guild)})

    async def allow_manage_webhooks_in_channel(self, guild: Guild, channel_id: int) -> None:
        """The channel's permissions → the bot's role → allow Manage Webhooks: CHANNEL_UPDATE."""
        self.webhooks_allowed_in.add(channel_id)
        await self.dispatch("CHANNEL_UPDATE", self._channel_payload(channel_id))

    async def create_role(self, guild: Guild, role_id: int, name: str, permissions: int) -> None:
        """A new role in the server, nobody's yet: GUILD_ROLE_CREATE."""
        self.server_roles.setdefault(guild.id, {})[role_id] = (name, permissions)
        role = self._role(role_id, name, permissions)
        await self.dispatch("GUILD_ROLE_CREATE", {"guild_id": str(guild.id), "role": role})

    async def give_the_bot_role(self, guild: Guild, role_id: int) -> None:
        """The bot is given an existing role: the bot's own GUILD_MEMBER_UPDATE.

        Discord sends a bot the updates of its own member without the GUILD_MEMBERS intent.
        """
        self.extra_bot_roles.setdefault(guild.id, []).append(role_id)
        await self.dispatch("GUILD_MEMBER_UPDATE", {**self._bot_member(guild), "guild_id": str(guild.id)})

    def _bot_member(self, guild: Guild) -> dict[str, Any]:
        return {
            **self._member(None, (guild.bot_role_id, *self.extra_bot_roles.get(guild.id, []))),
            "user": BOT,
        }

    def _create_webhook(self, channel_id: int, body: dict[str, Any]) -> web.Response:
        refused = self._webhook_refusal(channel_id)
        if refused is not None:
            return refused
        name = body.get("name") or ""
        if not 1 <= len(name) <= 80 or any(part in name.lower() for part in FORBIDDEN_NAME_PARTS):
            return _error(400, INVALID_FORM_BODY, "Invalid Form Body")
        token = f"webhook-token-{next(self._ids)}"
        webhook = Webhook(id=next(self._ids), token=token, channel_id=channel_id, name=name)
        self.webhooks.append(webhook)
        return _json(self._webhook_payload(webhook))

    def _list_webhooks(self, channel_id: int) -> web.Response:
        refused = self._webhook_refusal(channel_id)
        if refused is not None:
            return refused
        return _json([self._webhook_payload(w) for w in self.webhooks if w.channel_id == channel_id])

    def _webhook(self, webhook_id: int, token: str) -> Webhook | None:
        return next((w for w in self.webhooks if w.id == webhook_id and w.token == token), None)

    def _webhook_target(self, webhook: Webhook, query: dict[str, str]) -> int | None:
        """The channel a webhook call lands in: its channel, or a thread of it (`thread_id`)."""
        if "thread_id" not in query:
            return webhook.channel_id
        thread_id = int(query["thread_id"])
        return thread_id if thread_id == THREAD_ID and webhook.channel_id == CHANNEL_ID else None

    async def _execute_webhook(self, webhook_id: int, token: str, call: RestCall) -> web.Response:
        webhook = self._webhook(webhook_id, token)
        if webhook is None:
            return _error(404, UNKNOWN_WEBHOOK, "Unknown Webhook")
        target = self._webhook_target(webhook, call.query)
        if target is None:
            return _error(400, INVALID_FORM_BODY, "Invalid Form Body")
        body = call.json or {}
        username = body.get("username") or webhook.name
        if any(part in username.lower() for part in FORBIDDEN_NAME_PARTS) or len(username) > 80:
            return _error(400, INVALID_FORM_BODY, "Invalid Form Body")
        if body.get("components") and webhook.application_id is None:
            return _error(400, INVALID_FORM_BODY, "Invalid Form Body")
        payload = await self._create(
            target,
            body,
            webhook=webhook,
            username=username,
            avatar_url=body.get("avatar_url"),
            files=call.files,
        )
        # Discord reads query booleans as true/false or 1/0.
        return _json(payload) if call.query.get("wait", "").lower() in ("true", "1") else _no_content()

    def _get_webhook_message(
        self, webhook_id: int, token: str, message_id: int, call: RestCall
    ) -> web.Response:
        webhook = self._webhook(webhook_id, token)
        if webhook is None:
            return _error(404, UNKNOWN_WEBHOOK, "Unknown Webhook")
        target = self._webhook_target(webhook, call.query)
        message = next((m for m in self.sent if m.id == message_id), None)
        if self._unknown_message(message_id, target) or message is None or message.webhook_id != webhook.id:
            return _error(404, UNKNOWN_MESSAGE, "Unknown Message")
        return _json(self.payload_of(message))

    async def _edit_webhook_message(
        self, webhook_id: int, token: str, message_id: int, call: RestCall
    ) -> web.Response:
        webhook = self._webhook(webhook_id, token)
        if webhook is None:
            return _error(404, UNKNOWN_WEBHOOK, "Unknown Webhook")
        target = self._webhook_target(webhook, call.query)
        message = next((m for m in self.sent if m.id == message_id), None)
        if self._unknown_message(message_id, target) or message is None or message.webhook_id != webhook.id:
            return _error(404, UNKNOWN_MESSAGE, "Unknown Message")
        return _json(await self._apply_edit(message, call.json or {}))

    # --- interactions ------------------------------------------------------------------

    async def _interaction_callback(self, token: str, body: dict[str, Any]) -> web.Response:
        interaction = self.interactions[token]
        interaction.callbacks.append(body)
        # 7 (UPDATE_MESSAGE) edits the message the component is on.
        if body["type"] == 7 and interaction.message_id is not None:
            await self._apply_edit(self.message(interaction.message_id), body.get("data") or {})
        return _json(
            {
                "interaction": {
                    "id": str(interaction.id),
                    "type": 2,
                    "response_message_loading": body["type"] == 5,
                    "response_message_ephemeral": False,
                },
                "resource": {"type": body["type"]},
            }
        )

    def _followup(self, token: str, body: dict[str, Any]) -> web.Response:
        interaction = self.interactions[token]
        interaction.followups.append(body["content"])
        return _json(
            self.message_payload(interaction.channel_id, body["content"], author=BOT)
            | {"webhook_id": str(APPLICATION_ID)}
        )


def _multipart(request: web.Request, body: bytes) -> tuple[Any, list[UploadedFile]]:
    """discord.py sends `payload_json` beside the files (`files[0]`, `files[1]`…)."""
    message = BytesParser(policy=email_policy).parsebytes(
        f"Content-Type: {request.headers['Content-Type']}\r\n\r\n".encode() + body
    )
    payload: Any = None
    files: list[UploadedFile] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        assert isinstance(data, bytes)
        if name == "payload_json":
            payload = json.loads(data)
        elif isinstance(name, str) and name.startswith("files["):
            filename = part.get_filename() or ""
            # Discord names a file's type by its extension, whatever the upload declared.
            content_type = mimetypes.guess_type(filename)[0] or part.get_content_type()
            files.append(UploadedFile(filename, content_type, data))
    return payload, files


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"message": message, "code": code}, status=status)


def _no_content() -> web.Response:
    return web.Response(status=204)
