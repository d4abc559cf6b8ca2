"""A real Telegram Bot API server on 127.0.0.1 that tests drive and inspect.

    async with FakeBotAPI() as api:
        api.push(private_text(1, "hello"))          # served by getUpdates until confirmed
        api.fail_next("editMessageText", flood(1))  # the next edit answers 429
        await api.wait_for(lambda: api.sent_texts(chat_id=1))
        assert api.calls_to("sendChatAction")

It answers the methods the Telegram lane uses (getMe, getUpdates, sendMessage,
editMessageText, sendMessageDraft, deleteMessage, sendChatAction, getFile, sendVoice,
setMyCommands, setWebhook, deleteWebhook) and serves file downloads, the way
Telegram does rather than the way Chorus expects:

- getFile refuses files over 20 MB ("file is too big"), as the Bot API does for bots.
- sendVoice takes the file as a multipart upload (`attach://<part>`, or the part itself) or a
  file_id sent before; an OGG/Opus
  file (or MP3, M4A) becomes a voice note, anything else is sent as a document, as Telegram
  does; uploads over 50 MB are refused ("Request Entity Too Large").

- getUpdates hands out every update not yet confirmed; an update is confirmed only
  when a later call passes an `offset` above its id, so a poller that never
  confirmed (it crashed, or its next call never arrived) gets it again. While a
  webhook is set, getUpdates answers 409. A getUpdates call ends the one still
  waiting (a second poller for the same bot): the waiting call answers 409
  "Conflict: terminated by other getUpdates request".
- message text follows Telegram's rules (tests/telegram/telegram_text.py): entities
  in UTF-16 units checked against the text, legacy Markdown parsed as Telegram
  parses it, 4096 characters, "message is not modified", and an edit of a message
  that was deleted is "message to edit not found".
- a group chat takes at most 20 messages (sends and edits) a minute; more is a 429
  with the seconds until the oldest leaves the window.
- sendMessageDraft (Bot API 9.3) works in private chats only; a draft is shown until
  the bot sends a message to that chat, and `press_stop` is the person pressing the
  Stop button of a draft sent with `can_stop`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.web_request import FileField

from tests.support.local_server import LocalServer
from tests.telegram.telegram_text import FormattedText, TextRejected, formatted_text

TOKEN = "123456:TEST-token-for-chorus"
BOT_ID = 123456
BOT_USERNAME = "chorus_bot"
GROUP_MESSAGES_PER_MINUTE = 20
DOWNLOAD_LIMIT_BYTES = 20 * 1024 * 1024
UPLOAD_LIMIT_BYTES = 50 * 1024 * 1024
# Form fields aiogram sends JSON-encoded.
JSON_FIELDS = {"reply_parameters", "commands", "allowed_updates", "reply_markup", "scope", "entities"}
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


@dataclass(frozen=True)
class SentVoice:
    """A file the bot sent with sendVoice, and how Telegram shows it (a voice note or a document)."""

    chat_id: str
    message_id: int
    data: bytes
    filename: str
    duration: int | None
    shown_as: str
    reply_to: int | None


@dataclass
class ChatMessage:
    """A message the bot sent, as it stands now (edits applied)."""

    chat_id: str
    message_id: int
    shown: FormattedText
    deleted: bool = False
    # Its inline keyboard (`reply_markup`), as the last send or edit left it.
    reply_markup: dict[str, Any] | None = None
    # What `answerCallbackQuery` told the people who pressed its buttons.
    answers: list[str] = field(default_factory=list)

    def button_data(self, text: str) -> str:
        """The callback data of the inline button labelled `text`."""
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        for button in (button for row in rows for button in row):
            if button["text"] == text:
                data: str = button["callback_data"]
                return data
        raise AssertionError(f"no button {text!r} on message {self.message_id}: {self.reply_markup}")


@dataclass
class Draft:
    """A streamed draft (sendMessageDraft) and every text it showed."""

    chat_id: str
    draft_id: int
    shown: FormattedText
    can_stop: bool
    history: list[FormattedText] = field(default_factory=list)
    visible: bool = True


@dataclass
class FakeBotAPI(LocalServer):
    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)
    group_limit_per_minute: int = GROUP_MESSAGES_PER_MINUTE

    shutdown_timeout = 0.5

    def __post_init__(self) -> None:
        super().__init__()
        self._pending: list[dict[str, Any]] = []
        # The highest offset a getUpdates call passed: every update below it is confirmed.
        self.confirmed_offset = 0
        # Set (and replaced) when updates arrive, a getUpdates call starts, or the server stops.
        self._updates_changed = asyncio.Event()
        # Counts getUpdates calls: a waiting call that sees a later one was terminated by it.
        self._polls = 0
        self._stopping = False
        self._failures: dict[str, list[dict[str, Any]]] = {}
        self._files: dict[str, StoredFile] = {}
        self._messages: dict[tuple[str, int], ChatMessage] = {}
        self._drafts: dict[tuple[str, int], Draft] = {}
        # Callback queries not yet answered, by id, and the message whose button was pressed.
        self._callback_queries: dict[str, ChatMessage] = {}
        self._group_sends: dict[str, deque[float]] = {}
        self._sent_ids = itertools.count(5000)
        self.voices: list[SentVoice] = []
        self._webhook_url = ""
        # While set, getUpdates calls that carry an offset are lost on the way.
        self.losing_confirmations = False

    # --- what tests call -------------------------------------------------------

    def push(self, *updates: dict[str, Any]) -> None:
        """Telegram receives updates for the bot; getUpdates serves them until confirmed."""
        known = {update["update_id"] for update in self._pending}
        self._pending.extend(update for update in updates if update["update_id"] not in known)
        self._pending.sort(key=lambda update: update["update_id"])
        self._notify_pollers()

    @property
    def unconfirmed(self) -> list[int]:
        return [update["update_id"] for update in self._pending]

    def fail_next(self, method: str, error: dict[str, Any]) -> None:
        """The next call of `method` answers with `error` (a Bot API error body)."""
        self._failures.setdefault(method, []).append(error)

    def add_file(self, file_id: str, data: bytes, path: str) -> None:
        self._files[file_id] = StoredFile(file_id, path, data)

    def delete_message(self, chat_id: int, message_id: int) -> None:
        """Someone deletes a message the bot sent."""
        self._messages[(str(chat_id), message_id)].deleted = True

    def press_stop(self, chat_id: int, draft_id: int, first_name: str = "Alice") -> None:
        """The person presses Stop on a draft sent with `can_stop`."""
        draft = self._drafts[(str(chat_id), draft_id)]
        assert draft.can_stop, "this draft has no Stop button"
        self.push(
            {
                "update_id": next(_update_ids),
                "stopped_message_generation": {
                    "chat": private_chat(chat_id, first_name),
                    "draft_id": draft_id,
                },
            }
        )

    def press_button(
        self, chat_id: int, message_id: int, text: str, user_id: int, first_name: str = "Alice"
    ) -> None:
        """Someone presses the inline button labelled `text` under a message the bot sent."""
        sent = self._messages[(str(chat_id), message_id)]
        query_id = str(next(_update_ids))
        self._callback_queries[query_id] = sent
        self.push(
            {
                "update_id": next(_update_ids),
                "callback_query": {
                    "id": query_id,
                    "from": user(user_id, first_name),
                    "message": {
                        **_bot_message({"chat_id": chat_id}, message_id, sent.shown),
                        **({"reply_markup": sent.reply_markup} if sent.reply_markup else {}),
                    },
                    "chat_instance": f"instance-{chat_id}",
                    "data": sent.button_data(text),
                },
            }
        )

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def messages(self, chat_id: int | None = None) -> list[ChatMessage]:
        """Messages the bot sent that are still there, oldest first."""
        return [
            message
            for (chat, _), message in sorted(self._messages.items(), key=lambda item: item[0][1])
            if (chat_id is None or chat == str(chat_id)) and not message.deleted
        ]

    def sent_texts(self, chat_id: int | None = None) -> list[str]:
        """The visible text of every message as it stands now (edits applied), oldest first."""
        return [message.shown.text for message in self.messages(chat_id)]

    def drafts(self, chat_id: int) -> list[Draft]:
        return [draft for (chat, _), draft in self._drafts.items() if chat == str(chat_id)]

    async def wait_for(self, condition: Callable[[], Any], timeout: float = 60.0) -> Any:
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
        self._stopping = True
        self._notify_pollers()

    def _notify_pollers(self) -> None:
        self._updates_changed.set()
        self._updates_changed = asyncio.Event()

    # --- the Bot API -----------------------------------------------------------

    async def _method(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = _params(await request.post())
        if method == "getUpdates" and self.losing_confirmations and "offset" in params:
            # Lost on the way: Telegram never sees this call or the offset it confirms.
            if request.transport is not None:
                request.transport.close()
            return web.StreamResponse()
        self.calls.append(Call(method, params, time.monotonic()))
        failures = self._failures.get(method)
        if failures:
            body = failures.pop(0)
            return web.json_response(body, status=body["error_code"])
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        try:
            return await handler(request, params)
        except TextRejected as rejected:
            return _error(400, rejected.description)

    async def _api_getMe(self, _request: web.Request, _params: dict[str, Any]) -> web.Response:
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

    async def _api_getUpdates(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        if self._webhook_url:
            return _error(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        self._polls += 1
        poll = self._polls
        # An earlier call still waiting is terminated by this one, as Telegram does.
        self._notify_pollers()
        offset = int(params.get("offset", 0))
        if offset > 0:
            self.confirmed_offset = max(self.confirmed_offset, offset)
            # Everything below the offset is confirmed and never served again.
            self._pending = [update for update in self._pending if update["update_id"] >= offset]
        with suppress(TimeoutError):
            async with asyncio.timeout(float(params.get("timeout", 0))):
                while not (self._pending or self._polls != poll or self._stopping):
                    await self._updates_changed.wait()
        if self._polls != poll:
            return _error(
                409,
                "Conflict: terminated by other getUpdates request; "
                "make sure that only one bot instance is running",
            )
        limit = int(params.get("limit", 100))
        return _ok(self._pending[:limit])

    async def _api_sendMessage(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        chat_id = str(params["chat_id"])
        shown = formatted_text(params)
        limited = self._group_limit(chat_id)
        if limited is not None:
            return limited
        message_id = next(self._sent_ids)
        self._messages[(chat_id, message_id)] = ChatMessage(
            chat_id, message_id, shown, reply_markup=params.get("reply_markup")
        )
        # A message from the bot replaces its draft in that chat.
        for draft in self.drafts(int(chat_id)):
            draft.visible = False
        return _ok(_bot_message(params, message_id, shown))

    async def _api_editMessageText(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        key = (str(params["chat_id"]), int(params["message_id"]))
        stored = self._messages.get(key)
        if stored is None or stored.deleted:
            return _error(400, "Bad Request: message to edit not found")
        shown = formatted_text(params)
        if stored.shown == shown:
            return _error(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        limited = self._group_limit(key[0])
        if limited is not None:
            return limited
        stored.shown = shown
        # An edit without a keyboard removes the one the message had.
        stored.reply_markup = params.get("reply_markup")
        return _ok(_bot_message(params, key[1], shown))

    async def _api_answerCallbackQuery(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        pressed = self._callback_queries.pop(str(params["callback_query_id"]), None)
        if pressed is None:
            return _error(
                400, "Bad Request: query is too old and response timeout expired or query ID is invalid"
            )
        pressed.answers.append(str(params.get("text", "")))
        return _ok(True)

    async def _api_sendMessageDraft(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        chat_id = str(params["chat_id"])
        if int(chat_id) < 0:
            return _error(400, "Bad Request: drafts can be sent only to private chats")
        draft_id = int(params.get("draft_id", 0))
        if draft_id == 0:
            return _error(400, "Bad Request: draft_id must be non-zero")
        shown = formatted_text(params, allow_empty=True)
        can_stop = str(params.get("can_stop", "")).lower() == "true"
        draft = self._drafts.setdefault((chat_id, draft_id), Draft(chat_id, draft_id, shown, can_stop))
        draft.shown, draft.can_stop, draft.visible = shown, can_stop, True
        draft.history.append(shown)
        return _ok(True)

    async def _api_deleteMessage(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        stored = self._messages.get((str(params["chat_id"]), int(params["message_id"])))
        if stored is None or stored.deleted:
            return _error(400, "Bad Request: message to delete not found")
        stored.deleted = True
        return _ok(True)

    async def _api_sendChatAction(self, _request: web.Request, _params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _api_setMyCommands(self, _request: web.Request, _params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _api_setWebhook(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        self._webhook_url = str(params.get("url", ""))
        return _ok(True)

    async def _api_deleteWebhook(self, _request: web.Request, _params: dict[str, Any]) -> web.Response:
        self._webhook_url = ""
        return _ok(True)

    async def _api_getFile(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        stored = self._files.get(params["file_id"])
        if stored is None:
            return _error(400, "Bad Request: invalid file_id")
        if len(stored.data) > DOWNLOAD_LIMIT_BYTES:
            return _error(400, "Bad Request: file is too big")
        return _ok(
            {
                "file_id": stored.file_id,
                "file_unique_id": f"u-{stored.file_id}",
                "file_size": len(stored.data),
                "file_path": stored.path,
            }
        )

    async def _api_sendVoice(self, _request: web.Request, params: dict[str, Any]) -> web.Response:
        chat_id = str(params["chat_id"])
        upload = params.get("voice")
        if isinstance(upload, str) and upload.startswith("attach://"):
            # The file travels in the form part the attach:// name points at.
            upload = params.get(upload.removeprefix("attach://"))
        if isinstance(upload, FileField):
            data, filename = upload.file.read(), upload.filename
        elif isinstance(upload, str) and upload in self._files:
            data, filename = self._files[upload].data, self._files[upload].path
        else:
            return _error(400, "Bad Request: there is no voice in the request")
        if len(data) > UPLOAD_LIMIT_BYTES:
            return _error(413, "Request Entity Too Large")
        limited = self._group_limit(chat_id)
        if limited is not None:
            return limited
        shown_as = "voice" if _plays_as_voice(data) else "document"
        message_id = next(self._sent_ids)
        duration = int(params["duration"]) if "duration" in params else None
        reply = params.get("reply_parameters", {}).get("message_id")
        self.voices.append(SentVoice(chat_id, message_id, data, filename, duration, shown_as, reply))
        file_id = f"sent-voice-{message_id}"
        self.add_file(file_id, data, f"voice/{file_id}.ogg")
        media: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(data)}
        if shown_as == "voice":
            media.update(duration=duration or 0, mime_type="audio/ogg")
        else:
            media.update(file_name=filename)
        body = _bot_message(params, message_id, FormattedText("", []))
        del body["text"]
        body[shown_as] = media
        return _ok(body)

    async def _download(self, request: web.Request) -> web.Response:
        self.calls.append(Call("download", {"path": request.match_info["path"]}, time.monotonic()))
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        for stored in self._files.values():
            if stored.path == request.match_info["path"]:
                return web.Response(body=stored.data)
        return web.Response(status=404)

    def _group_limit(self, chat_id: str) -> web.Response | None:
        """Telegram's flood control for groups: 20 messages a minute, then 429."""
        if int(chat_id) > 0:
            return None
        now = time.monotonic()
        sent = self._group_sends.setdefault(chat_id, deque())
        while sent and now - sent[0] >= 60:
            sent.popleft()
        if len(sent) >= self.group_limit_per_minute:
            wait = max(1, int(60 - (now - sent[0])) + 1)
            return web.json_response(flood(wait), status=429)
        sent.append(now)
        return None


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


def sticker(file_id: str = "stk1", emoji: str = "😀") -> dict[str, Any]:
    return {
        "file_id": file_id,
        "file_unique_id": f"{file_id}-u",
        "type": "regular",
        "width": 512,
        "height": 512,
        "is_animated": False,
        "is_video": False,
        "emoji": emoji,
    }


def voice(file_id: str = "voc1", duration: int = 3) -> dict[str, Any]:
    return {
        "file_id": file_id,
        "file_unique_id": f"{file_id}-u",
        "duration": duration,
        "mime_type": "audio/ogg",
    }


def video_note(file_id: str = "vn1", duration: int = 4) -> dict[str, Any]:
    return {"file_id": file_id, "file_unique_id": f"{file_id}-u", "length": 240, "duration": duration}


def audio(file_id: str = "aud1", duration: int = 3, file_name: str = "song.mp3") -> dict[str, Any]:
    return {
        "file_id": file_id,
        "file_unique_id": f"{file_id}-u",
        "duration": duration,
        "file_name": file_name,
        "mime_type": "audio/mpeg",
        "performer": "Test Band",
        "title": "A Tone",
    }


def location(latitude: float = 52.52, longitude: float = 13.405) -> dict[str, Any]:
    return {"latitude": latitude, "longitude": longitude}


def poll(question: str = "Lunch?") -> dict[str, Any]:
    return {
        "id": "poll-1",
        "question": question,
        "options": [
            {"persistent_id": "o1", "text": "yes", "voter_count": 0},
            {"persistent_id": "o2", "text": "no", "voter_count": 0},
        ],
        "total_voter_count": 0,
        "is_closed": False,
        "is_anonymous": True,
        "type": "regular",
        "allows_multiple_answers": False,
        "allows_revoting": False,
        "members_only": False,
    }


# --- errors ---------------------------------------------------------------------


def flood(retry_after: int) -> dict[str, Any]:
    return {
        "ok": False,
        "error_code": 429,
        "description": f"Too Many Requests: retry after {retry_after}",
        "parameters": {"retry_after": retry_after},
    }


def _params(form: Any) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in form.items():
        params[key] = json.loads(value) if key in JSON_FIELDS and isinstance(value, str) else value
    return params


def _plays_as_voice(data: bytes) -> bool:
    """OGG/Opus, MP3 or M4A: what Telegram clients play as a voice note."""
    ogg_opus = data.startswith(b"OggS") and b"OpusHead" in data[:64]
    mp3 = data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE6 == 0xE2)
    return ogg_opus or mp3 or data[4:8] == b"ftyp"


def _bot_message(params: dict[str, Any], message_id: int, shown: FormattedText) -> dict[str, Any]:
    chat_id = int(params["chat_id"])
    body: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Chorus", "username": BOT_USERNAME},
        "text": shown.text,
    }
    if shown.entities:
        body["entities"] = shown.entities
    return body


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str) -> web.Response:
    return web.json_response({"ok": False, "error_code": status, "description": description}, status=status)
