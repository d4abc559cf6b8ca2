"""Export a session's whole transcript (Markdown or JSON) and import it back.

JSON export → import → export gives the same document apart from the session
id: every message with its sequence, kind, persona, sender, lane, status, time and
attachments (files included, base64), a tool call's calls and a tool result's call id
and tool name, a row's provider blocks (the signed thinking an Anthropic tool round
replays) and a reply's billed prompt tokens survive the round trip. The last two are
optional in version 3: a file written before them imports with none. Files of earlier
versions still import: version 2 had no tool rows, and in version 1 (before rows had a
kind) events are told apart by the tags their text began with then.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.errors import TranscriptFileError
from bot.storage.message_append import NewAttachment, NewMessage
from bot.storage.message_rows import decode_blocks, decode_calls
from bot.storage.messages import MessageStore
from bot.storage.models import ChatSession, Message
from bot.storage.stores import Stores
from bot.turns.attachments import AttachmentStore
from transcript.kinds import (
    EVENT_KINDS,
    MessageKind,
    Role,
    Status,
    UnknownMessageKind,
    check_row,
    message_kind,
)
from transcript.rows import StoredToolCall

EXPORT_FORMAT = "chorus-transcript"
EXPORT_VERSION = 3
# Version 2 had kinds but no tool rows (no calls, call ids or tool names).
NO_TOOLS_VERSION = 2
# Version 1 had no kinds: an event was a `system` row whose text began with its tag.
LEGACY_VERSION = 1
IMPORTED_VERSIONS = (EXPORT_VERSION, NO_TOOLS_VERSION, LEGACY_VERSION)
LEGACY_EVENT_TAGS: tuple[tuple[MessageKind, str, bool], ...] = (
    # (kind, tag, whether the tag is dropped from the text), as migration 0009_message_kind reads them.
    ("command_reply", "command reply: ", True),
    ("command", "command: ", True),
    ("persona_switch", "persona switched from ", False),
    ("error", "error: ", True),
)


def export_json(store: MessageStore, attachments: AttachmentStore, session: ChatSession) -> dict[str, Any]:
    messages = store.messages(session.id)
    files = store.attachments_for(message.id for message in messages if message.id is not None)
    seq_of = {message.id: message.seq for message in messages}
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {
            "id": session.id,
            "kind": session.kind,
            "owner_kind": session.owner_kind,
            "persona_id": session.persona_id,
            "title": session.title,
            "created_at": _iso(session.created_at),
        },
        "messages": [
            {
                "seq": message.seq,
                "kind": message.kind,
                "role": message.role,
                "content": message.content,
                "persona_id": message.persona_id,
                "sender_id": message.sender_id,
                "sender_name": message.sender_name,
                "lane": message.lane,
                "platform_chat_id": message.platform_chat_id,
                "platform_message_id": message.platform_message_id,
                "reply_to_seq": seq_of.get(message.reply_to_id),
                "token_count": message.token_count,
                "status": message.status,
                "created_at": _iso(message.created_at),
                "tool_calls": [
                    {"id": call.id, "name": call.name, "arguments": call.arguments}
                    for call in decode_calls(message.tool_calls)
                ],
                "tool_call_id": message.tool_call_id,
                "tool_name": message.tool_name,
                "model": message.model,
                "provider_blocks": decode_blocks(message.provider_blocks),
                "prompt_tokens": message.prompt_tokens,
                "cached_tokens": message.cached_tokens,
                "cache_write_tokens": message.cache_write_tokens,
                "attachments": [
                    {
                        "kind": item.kind,
                        "filename": item.filename,
                        "mime_type": item.mime_type,
                        "size": item.size,
                        "sha256": item.sha256,
                        "text": item.text,
                        "data_base64": _file_base64(attachments.path_of(item.path)),
                    }
                    for item in files.get(message.id or 0, [])
                ],
            }
            for message in messages
        ],
    }


def export_markdown(store: MessageStore, session: ChatSession) -> str:
    messages = store.messages(session.id)
    files = store.attachments_for(message.id for message in messages if message.id is not None)
    lines = [
        f"# Conversation {session.id}",
        "",
        f"- kind: {session.kind}",
        f"- started: {_iso(session.created_at)}",
        "",
    ]
    for message in messages:
        lines.append(_markdown_heading(message))
        lines.append("")
        if message.content:
            lines.append(message.content)
            lines.append("")
        for call in decode_calls(message.tool_calls):
            lines.append(f"🔧 `{call.name}` {call.arguments}")
            lines.append("")
        for item in files.get(message.id or 0, []):
            lines.append(f"📎 {item.kind}: {item.filename} ({item.mime_type}, {item.size:,} bytes)")
            lines.append("")
    return "\n".join(lines)


def _markdown_heading(message: Message) -> str:
    when = _iso(message.created_at)
    kind = message_kind(message.kind)
    if kind in EVENT_KINDS:
        return f"### event: {kind} · #{message.seq} · {when}"
    if kind == "tool_result":
        failed = " — failed" if message.status == "failed" else ""
        return f"### tool result: {message.tool_name} · #{message.seq} · {when}{failed}"
    if message.role == "assistant":
        status = "" if message.status == "complete" else f" — {message.status}"
        return (
            f"### {message.sender_name or message.persona_id} [persona: {message.persona_id}]"
            f" · #{message.seq} · {when}{status}"
        )
    lane = f" via {message.lane}" if message.lane else ""
    return f"### {message.sender_name or 'user'}{lane} · #{message.seq} · {when}"


def import_json(stores: Stores, attachments: AttachmentStore, document: dict[str, Any]) -> ChatSession:
    """Store an exported transcript as a new session (no route points at it)."""
    version = document.get("version")
    if document.get("format") != EXPORT_FORMAT or version not in IMPORTED_VERSIONS:
        raise TranscriptFileError("This file is not a Chorus transcript export (format/version missing).")
    legacy = version == LEGACY_VERSION
    items = sorted(document.get("messages", []), key=lambda entry: entry["seq"])
    # Every row is checked before anything is stored: a bad file leaves no half-imported session.
    rows = [(item, *_checked_row(item, legacy=legacy)) for item in items]
    meta = document.get("session") or {}
    session = stores.sessions.create_session(
        kind=meta.get("kind", "private"),
        owner_kind=meta.get("owner_kind", "person"),
        owner_id=f"import:{meta.get('id', 'unknown')}",
        persona_id=meta.get("persona_id"),
        title=meta.get("title") or "",
    )
    id_by_seq: dict[int, int] = {}
    for item, kind, role, status, content, calls in rows:
        stored_files = tuple(_restore_file(attachments, entry) for entry in item.get("attachments", []))
        reply_seq = item.get("reply_to_seq")
        stored = stores.messages.append(
            session.id,
            NewMessage(
                role=role,
                kind=kind,
                content=content,
                token_count=int(item.get("token_count", 0)),
                persona_id=item.get("persona_id"),
                sender_id=item.get("sender_id"),
                sender_name=item.get("sender_name"),
                lane=item.get("lane"),
                platform_chat_id=item.get("platform_chat_id"),
                platform_message_id=item.get("platform_message_id"),
                reply_to_id=id_by_seq.get(reply_seq) if reply_seq is not None else None,
                status=status,
                created_at=datetime.fromisoformat(item["created_at"]),
                attachments=stored_files,
                tool_calls=calls,
                tool_call_id=item.get("tool_call_id"),
                tool_name=item.get("tool_name"),
                model=item.get("model"),
                provider_blocks=item.get("provider_blocks"),
                prompt_tokens=_optional_count(item.get("prompt_tokens")),
                cached_tokens=_optional_count(item.get("cached_tokens")),
                cache_write_tokens=_optional_count(item.get("cache_write_tokens")),
                live=False,
            ),
        )
        if stored.seq != item["seq"]:
            raise TranscriptFileError(f"Message sequence {item['seq']} is out of order in the export.")
        id_by_seq[stored.seq] = stored.id or 0
    return stores.sessions.refresh(session)


def _checked_row(
    item: dict[str, Any], *, legacy: bool
) -> tuple[MessageKind, Role, Status, str, tuple[StoredToolCall, ...]]:
    kind, content = _kind_and_content(item, legacy=legacy)
    try:
        checked = check_row(kind, item["role"], item.get("status", "complete"))
    except UnknownMessageKind as error:
        raise TranscriptFileError(f"Message {item['seq']} of the export: {error}.") from error
    return (*checked, content, _tool_fields(item, checked[0]))


def _tool_fields(item: dict[str, Any], kind: MessageKind) -> tuple[StoredToolCall, ...]:
    """A tool call's calls; a call without them, or a result without its call id, is refused."""
    try:
        calls = tuple(
            StoredToolCall(str(call["id"]), str(call["name"]), str(call["arguments"]))
            for call in item.get("tool_calls") or ()
        )
    except (KeyError, TypeError) as error:
        raise TranscriptFileError(
            f"Message {item['seq']} of the export has a malformed tool call."
        ) from error
    if kind == "tool_call" and not calls:
        raise TranscriptFileError(f"Message {item['seq']} of the export is a tool call without its calls.")
    if kind == "tool_result" and not (item.get("tool_call_id") and item.get("tool_name")):
        raise TranscriptFileError(f"Message {item['seq']} of the export is a tool result without its call.")
    return calls


def _kind_and_content(item: dict[str, Any], *, legacy: bool) -> tuple[object, str]:
    """The row's kind and stored text: named in the file, or (version 1) read from its tag."""
    content = item.get("content", "")
    if not legacy:
        return item.get("kind"), content
    if item.get("role") != "system":
        return "message", content
    for kind, tag, dropped in LEGACY_EVENT_TAGS:
        if content.startswith(tag):
            return kind, content.removeprefix(tag) if dropped else content
    return "note", content


def load_document(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TranscriptFileError(f"Could not read {path}: {error}") from error
    if not isinstance(loaded, dict):
        raise TranscriptFileError(f"{path} does not contain a transcript export.")
    return loaded


def _restore_file(attachments: AttachmentStore, entry: dict[str, Any]) -> NewAttachment:
    data = base64.b64decode(entry.get("data_base64") or "")
    if data:
        stored = attachments.store_bytes(entry["filename"], entry["mime_type"], data)
        # The export's text is authoritative (extraction may differ between versions).
        return replace(stored, filename=entry["filename"], text=entry.get("text"))
    return NewAttachment(
        kind=entry["kind"],
        filename=entry["filename"],
        mime_type=entry["mime_type"],
        size=int(entry["size"]),
        sha256=entry["sha256"],
        path=f"attachments/{entry['sha256'][:2]}/{entry['sha256']}",
        text=entry.get("text"),
    )


def _optional_count(value: Any) -> int | None:
    return None if value is None else int(value)


def _file_base64(path: Path) -> str | None:
    try:
        return base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return None


def _iso(moment: datetime) -> str:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.isoformat()
