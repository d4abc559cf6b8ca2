"""The list of conversations: `chorus sessions` and the console's Conversations page.

A module of its own, so `chorus sessions` imports the tables it reads and nothing of the
console's other queries (context records, memory items, tool calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import col, select

from bot.storage.database import open_session
from bot.storage.models import Account, ChatSession, GroupRoute, Message


@dataclass(frozen=True)
class ConversationRow:
    session: ChatSession
    message_count: int
    last_activity: datetime | None
    lanes: tuple[str, ...]
    # Who talks here: a person's account names, or the group chat(s) routed to it.
    participants: tuple[str, ...]


def conversations(engine: DatabaseEngine, search: str = "", limit: int | None = 200) -> list[ConversationRow]:
    """Sessions, latest activity first; `search` matches ids, names, personas, lanes or text.

    At most `limit` (None: every session, as `chorus sessions` lists them)."""
    with open_session(engine) as db:
        stats = {
            session_id: (int(count), last)
            for session_id, count, last in db.exec(
                select(Message.session_id, func.count(), func.max(Message.created_at)).group_by(
                    col(Message.session_id)
                )
            )
        }
        lanes: dict[str, list[str]] = {}
        for session_id, lane in db.exec(
            select(Message.session_id, Message.lane)
            .where(col(Message.lane).is_not(None))
            .group_by(col(Message.session_id), col(Message.lane))
        ):
            lanes.setdefault(session_id, []).append(lane or "")
        people: dict[str, list[str]] = {}
        for account in db.exec(select(Account).order_by(col(Account.id))):
            name = account.display_name or account.username or account.platform_user_id
            people.setdefault(account.person_id, []).append(f"{name} ({account.lane})")
        groups: dict[str, list[str]] = {}
        for route in db.exec(select(GroupRoute).order_by(col(GroupRoute.id))):
            where = f"{route.lane} {route.chat_id}" + (f" / {route.thread_id}" if route.thread_id else "")
            groups.setdefault(route.session_id, []).append(where)
            lanes.setdefault(route.session_id, []).append(route.lane)
        matching_text: set[str] = set()
        if search:
            matching_text = set(
                db.exec(
                    select(Message.session_id)
                    .where(func.lower(Message.content).contains(search.lower()))
                    .distinct()
                )
            )
        sessions = list(db.exec(select(ChatSession)))
    rows: list[ConversationRow] = []
    for chat in sessions:
        count, last = stats.get(chat.id, (0, None))
        participants = people.get(chat.owner_id, []) if chat.owner_kind == "person" else []
        participants = participants or groups.get(chat.id, [])
        row = ConversationRow(
            session=chat,
            message_count=count,
            last_activity=last or chat.updated_at,
            lanes=tuple(sorted(set(lanes.get(chat.id, [])))),
            participants=tuple(participants),
        )
        if not search or chat.id in matching_text or _matches(row, search):
            rows.append(row)
    rows.sort(key=lambda row: _sortable(row.last_activity), reverse=True)
    return rows if limit is None else rows[:limit]


def _matches(row: ConversationRow, search: str) -> bool:
    needle = search.lower()
    haystack = " ".join(
        [row.session.id, row.session.title, row.session.persona_id or "", *row.lanes, *row.participants]
    ).lower()
    return needle in haystack


def _sortable(moment: datetime | None) -> float:
    if moment is None:
        return 0.0
    return moment.timestamp() if moment.tzinfo else moment.replace(tzinfo=None).timestamp()
