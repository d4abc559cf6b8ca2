"""Read-only queries for the operator's console: conversations, their records, memory items.

Chat turns never run these; they scan more than a turn may (every session, every
record of one session), which is fine for a person looking at a page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import Session, col, select

from bot.storage.context_models import ContextRecord, ContextSnip
from bot.storage.database import open_session
from bot.storage.memory_models import MemoryItem
from bot.storage.message_rows import decode_calls
from bot.storage.models import Account, ChatSession, GroupRoute, Message
from transcript import StoredToolCall
from transcript.kinds import REPLY_KIND

ITEM_LIMIT = 500
# The console's Tool calls page reads this many stored call rows at a time (each holds one
# round's calls), newest first, and pages back from the oldest one shown.
TOOL_CALL_ROWS = 50


@dataclass(frozen=True)
class ToolCallRow:
    """One call the model made, as the transcript holds it: its row, who asked, how it ended."""

    session_id: str
    seq: int  # the seq of the `tool_call` row that holds it
    row_id: int
    call: StoredToolCall
    created_at: datetime
    asker_name: str | None
    asker_id: str | None
    lane: str | None
    # The result row's status (`complete`, `failed`); None while the call has no result.
    result_status: str | None
    result_at: datetime | None


@dataclass(frozen=True)
class ConversationRow:
    session: ChatSession
    message_count: int
    last_activity: datetime | None
    lanes: tuple[str, ...]
    # Who talks here: a person's account names, or the group chat(s) routed to it.
    participants: tuple[str, ...]


class Overview:
    def __init__(self, engine: DatabaseEngine) -> None:
        self.engine = engine

    def _session(self) -> Session:
        return open_session(self.engine)

    def conversations(self, search: str = "", limit: int | None = 200) -> list[ConversationRow]:
        """Sessions, latest activity first; `search` matches ids, names, personas, lanes or text.

        At most `limit` (None: every session, as `chorus sessions` lists them)."""
        with self._session() as db:
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

    def records(self, session_id: str) -> list[ContextRecord]:
        """Every summary and collapse of the session, superseded summaries included."""
        with self._session() as db:
            return list(
                db.exec(
                    select(ContextRecord)
                    .where(ContextRecord.session_id == session_id)
                    .order_by(col(ContextRecord.last_seq), col(ContextRecord.id))
                )
            )

    def snips(self, session_id: str) -> list[ContextSnip]:
        """Every snip of the session, undone ones included."""
        with self._session() as db:
            return list(
                db.exec(
                    select(ContextSnip)
                    .where(ContextSnip.session_id == session_id)
                    .order_by(col(ContextSnip.id))
                )
            )

    def memory_items(
        self, owners: Sequence[tuple[str, str]] = (), search: str = "", limit: int = ITEM_LIMIT
    ) -> list[MemoryItem]:
        """Memory items, newest first; of the given (kind, id) owners, or of everyone."""
        query = select(MemoryItem)
        if owners:
            query = query.where(
                or_(
                    *(
                        (col(MemoryItem.owner_kind) == kind) & (col(MemoryItem.owner_id) == owner_id)
                        for kind, owner_id in owners
                    )
                )
            )
        if search:
            query = query.where(func.lower(MemoryItem.content).contains(search.lower()))
        with self._session() as db:
            return list(
                db.exec(
                    query.order_by(col(MemoryItem.updated_at).desc(), col(MemoryItem.id).desc()).limit(limit)
                )
            )

    def memory_item(self, item_id: int) -> MemoryItem | None:
        with self._session() as db:
            return db.get(MemoryItem, item_id)

    def tool_calls(self, limit: int = TOOL_CALL_ROWS, before: int | None = None) -> list[ToolCallRow]:
        """The calls of the newest `limit` call rows (of those older than row id `before`), newest first.

        Reads only what it shows: the call rows through `ix_messages_kind_id`, then their
        turns' results (by `reply_to_id`) and the user messages they answer (by id).
        """
        query = select(Message).where(Message.kind == "tool_call")
        if before is not None:
            query = query.where(col(Message.id) < before)
        with self._session() as db:
            call_rows = list(db.exec(query.order_by(col(Message.id).desc()).limit(limit)))
            turns = {row.reply_to_id for row in call_rows if row.reply_to_id is not None}
            results = list(
                db.exec(
                    select(Message)
                    .where(col(Message.reply_to_id).in_(turns), Message.kind == "tool_result")
                    .order_by(col(Message.seq))
                )
            )
            askers = {
                message.id: message for message in db.exec(select(Message).where(col(Message.id).in_(turns)))
            }
        found: list[ToolCallRow] = []
        for row in call_rows:
            asked = askers.get(row.reply_to_id or 0)
            for call in decode_calls(row.tool_calls):
                # A call's result is the first after its row with its id (ids repeat across rounds).
                result = next(
                    (
                        result
                        for result in results
                        if result.session_id == row.session_id
                        and result.seq > row.seq
                        and result.tool_call_id == call.id
                    ),
                    None,
                )
                found.append(
                    ToolCallRow(
                        session_id=row.session_id,
                        seq=row.seq,
                        row_id=row.id or 0,
                        call=call,
                        created_at=row.created_at,
                        asker_name=asked.sender_name if asked else None,
                        asker_id=asked.sender_id if asked else None,
                        lane=asked.lane if asked else None,
                        result_status=result.status if result else None,
                        result_at=result.created_at if result else None,
                    )
                )
        return found

    def persona_turns(self) -> dict[str, int]:
        """How many replies each persona gave, over every session."""
        with self._session() as db:
            return {
                persona_id or "": int(count)
                for persona_id, count in db.exec(
                    select(Message.persona_id, func.count())
                    .where(Message.role == "assistant", Message.kind == REPLY_KIND)
                    .group_by(col(Message.persona_id))
                )
            }

    def persona_sessions(self) -> dict[str, int]:
        """How many sessions have each persona active."""
        with self._session() as db:
            return {
                persona_id or "": int(count)
                for persona_id, count in db.exec(
                    select(ChatSession.persona_id, func.count()).group_by(col(ChatSession.persona_id))
                )
            }


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
