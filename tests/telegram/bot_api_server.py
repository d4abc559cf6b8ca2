"""A real Telegram Bot API server on 127.0.0.1 that tests drive and inspect.

    async with FakeBotAPI() as api:
        api.push(private_text(1, "hello"))          # served by the next getUpdates
        api.fail_next("editMessageText", flood(1))  # the next edit answers 429
        await api.wait_for(lambda: api.sent_texts(chat_id=1))
        assert api.calls_to("sendChatAction")

It answers the methods the Telegram lane uses (getMe, getUpdates, sendMessage,
editMessageText, sendChatAction, getFile, setMyCommands, setWebhook, deleteWebhook)
and serves file downloads, with Telegram's own rules where tests need them: 4096
characters per message, legacy Markdown that must parse, "message is not modified".
`getUpdates` serves every pushed update until a later call's `offset` confirms it, as
Telegram does; pushing an update again re-delivers it unless it was confirmed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.local_server import LocalServer

TOKEN = "123456:TEST-token-for-chorus"
BOT_ID = 123456
BOT_USERNAME = "chorus_bot"
MESSAGE_LIMIT = 4096
# Form fields aiogram sends JSON-encoded.
JSON_FIELDS = {"reply_parameters", "commands", "allowed_updates", "reply_markup", "scope"}
_update_ids = itertools.count(1000)
_message_ids = itertools.count(1)


@dataclass(frozen=True)
class Call:
    """One Bot API request as received."""

    method: str
    params: dict[str, Any]
    at: float


@dataclass
class StoredFile:
    file_id: str
    path: str
    data: bytes


@dataclass
class FakeBotAPI(LocalServer):
    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)

    shutdown_timeout = 0.5

    def __post_init__(self) -> None:
        super().__init__()
        self._updates: list[dict[str, Any]] = []
        self.confirmed_offset = 0
        self._updates_ready = asyncio.Event()
        self._failures: dict[str, list[dict[str, Any]]] = {}
        self._files: dict[str, StoredFile] = {}
        self._texts: dict[tuple[str, int], str] = {}
        self._sent_ids = itertools.count(5000)

    # --- what tests call -------------------------------------------------------

    def push(self, *updates: dict[str, Any]) -> None:
        """Queue updates for the next getUpdates."""
        self._updates.extend(update for update in updates if update not in self._updates)
        self._updates_ready.set()

    def fail_next(self, method: str, error: dict[str, Any]) -> None:
        """The next call of `method` answers with `error` (a Bot API error body)."""
        self._failures.setdefault(method, []).append(error)

    def add_file(self, file_id: str, data: bytes, path: str) -> None:
        self._files[file_id] = StoredFile(file_id, path, data)

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def sent_texts(self, chat_id: int | None = None) -> list[str]:
        """The text of every message as it stands now (edits applied), oldest first."""
        return [
            text
            for (chat, _), text in sorted(self._texts.items(), key=lambda item: item[0][1])
            if chat_id is None or chat == str(chat_id)
        ]

    async def wait_for(self, condition: Callable[[], Any], timeout: float = 5.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; calls: {[c.method for c in self.calls]}")
            await asyncio.sleep(0.02)
        return result

    # --- lifecycle -------------------------------------------------------------

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/bot{token}/{method}", self._method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)

    async def before_stop(self) -> None:
        self._updates_ready.set()

    # --- the Bot API -----------------------------------------------------------

    async def _method(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = _params(await request.post())
        self.calls.append(Call(method, params, time.monotonic()))
        if method == "getUpdates":
            return await self._get_updates(request, params)
        failures = self._failures.get(method)
        if failures:
            body = failures.pop(0)
            return web.json_response(body, status=body["error_code"])
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        return await handler(params)

    async def _api_getMe(self, _params: dict[str, Any]) -> web.Response:
        return _ok(
            {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Chorus",
                "username": BOT_USERNAME,
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        )

    async def _get_updates(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        # Like Telegram: an offset confirms every update below it; the rest are served
        # again and again until a later call confirms them.
        if "offset" in params:
            offset = int(params["offset"])
            self.confirmed_offset = max(self.confirmed_offset, offset)
        self._updates = [update for update in self._updates if update["update_id"] >= self.confirmed_offset]
        if not self._updates:
            self._updates_ready.clear()
            timeout = float(params.get("timeout", 0))
            with suppress(TimeoutError):
                await asyncio.wait_for(self._updates_ready.wait(), timeout)
        if request.transport is None or request.transport.is_closing():
            # The poller went away (a stopped lane): the updates wait for the next one.
            return _ok([])
        limit = int(params.get("limit", 100))
        return _ok(sorted(self._updates, key=lambda update: update["update_id"])[:limit])

    async def _api_sendMessage(self, params: dict[str, Any]) -> web.Response:
        rejected = _check_text(params)
        if rejected:
            return rejected
        message_id = next(self._sent_ids)
        self._texts[(str(params["chat_id"]), message_id)] = params["text"]
        return _ok(_bot_message(params, message_id))

    async def _api_editMessageText(self, params: dict[str, Any]) -> web.Response:
        key = (str(params["chat_id"]), int(params["message_id"]))
        if key not in self._texts:
            return _error(400, "Bad Request: message to edit not found")
        rejected = _check_text(params)
        if rejected:
            return rejected
        if self._texts[key] == params["text"]:
            return _error(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        self._texts[key] = params["text"]
        return _ok(_bot_message(params, key[1]))

    async def _api_sendChatAction(self, _params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _api_setMyCommands(self, _params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _api_setWebhook(self, _params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _api_deleteWebhook(self, _params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _api_getFile(self, params: dict[str, Any]) -> web.Response:
        stored = self._files.get(params["file_id"])
        if stored is None:
            return _error(400, "Bad Request: invalid file_id")
        return _ok(
            {
                "file_id": stored.file_id,
                "file_unique_id": f"u-{stored.file_id}",
                "file_size": len(stored.data),
                "file_path": stored.path,
            }
        )

    async def _download(self, request: web.Request) -> web.Response:
        self.calls.append(Call("download", {"path": request.match_info["path"]}, time.monotonic()))
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        for stored in self._files.values():
            if stored.path == request.match_info["path"]:
                return web.Response(body=stored.data)
        return web.Response(status=404)


# --- updates as Telegram sends them -----------------------------------------------


def user(user_id: int, first_name: str = "Alice", last_name: str | None = None) -> dict[str, Any]:
    person: dict[str, Any] = {
        "id": user_id,
        "is_bot": False,
        "first_name": first_name,
        "username": first_name.lower(),
    }
    if last_name:
        person["last_name"] = last_name
    return person


def private_chat(user_id: int, first_name: str = "Alice") -> dict[str, Any]:
    return {"id": user_id, "type": "private", "first_name": first_name}


def group_chat(chat_id: int, *, forum: bool = False) -> dict[str, Any]:
    chat: dict[str, Any] = {"id": chat_id, "type": "supergroup", "title": "Crew"}
    if forum:
        chat["is_forum"] = True
    return chat


def message(
    chat: dict[str, Any],
    sender: dict[str, Any],
    text: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A message update; `fields` are added to the message as given."""
    body: dict[str, Any] = {
        "message_id": fields.pop("message_id", None) or next(_message_ids),
        "date": int(time.time()),
        "chat": chat,
        "from": sender,
    }
    if text is not None:
        body["text"] = text
        entities = fields.pop("entities", None) or _entities(text)
        if entities:
            body["entities"] = entities
    body.update(fields)
    return {"update_id": next(_update_ids), "message": body}


def private_text(user_id: int, text: str, first_name: str = "Alice", **fields: Any) -> dict[str, Any]:
    return message(private_chat(user_id, first_name), user(user_id, first_name), text, **fields)


def photo_sizes(file_id: str, sizes: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
    """PhotoSize entries (width, height, bytes), the smallest first as Telegram sends them."""
    return [
        {
            "file_id": f"{file_id}-{width}",
            "file_unique_id": f"{file_id}-u{width}",
            "width": width,
            "height": height,
            "file_size": size,
        }
        for width, height, size in sizes
    ]


def _entities(text: str) -> list[dict[str, Any]]:
    """The mention and command entities Telegram would attach (ASCII texts)."""
    entities: list[dict[str, Any]] = []
    if text.startswith("/"):
        entities.append({"type": "bot_command", "offset": 0, "length": len(text.split()[0])})
    position = 0
    for word in text.split(" "):
        if word.startswith("@") and len(word) > 1:
            entities.append({"type": "mention", "offset": position, "length": len(word)})
        position += len(word) + 1
    return entities


# --- errors and Telegram's text rules -------------------------------------------


def flood(retry_after: int) -> dict[str, Any]:
    return {
        "ok": False,
        "error_code": 429,
        "description": f"Too Many Requests: retry after {retry_after}",
        "parameters": {"retry_after": retry_after},
    }


def _check_text(params: dict[str, Any]) -> web.Response | None:
    text = params.get("text", "")
    if not text.strip():
        return _error(400, "Bad Request: message text is empty")
    if len(text) > MESSAGE_LIMIT:
        return _error(400, "Bad Request: message is too long")
    if params.get("parse_mode") == "Markdown":
        offset = _unclosed_markdown(text)
        if offset is not None:
            return _error(
                400,
                "Bad Request: can't parse entities: Can't find end of the entity "
                f"starting at byte offset {offset}",
            )
    return None


def _unclosed_markdown(text: str) -> int | None:
    """Where an entity of Telegram's legacy Markdown opens without closing, else None."""
    position = 0
    while position < len(text):
        for marker in ("```", "`", "*", "_"):
            if text.startswith(marker, position):
                end = text.find(marker, position + len(marker))
                if end == -1:
                    return len(text[:position].encode())
                position = end + len(marker)
                break
        else:
            position += 2 if text[position] == "\\" else 1
    return None


def _params(form: Any) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in form.items():
        params[key] = json.loads(value) if key in JSON_FIELDS else value
    return params


def _bot_message(params: dict[str, Any], message_id: int) -> dict[str, Any]:
    return {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": int(params["chat_id"]), "type": "private"},
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Chorus", "username": BOT_USERNAME},
        "text": params["text"],
    }


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str) -> web.Response:
    return web.json_response({"ok": False, "error_code": status, "description": description}, status=status)
