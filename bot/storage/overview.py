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
from bot.storage.conversation_list import ConversationRow, conversations
from bot.storage.database import open_session
from bot.storage.memory_models import MemoryItem
from bot.storage.message_rows import decode_calls
from bot.storage.models import ChatSession, Message
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


class Overview:
    def __init__(self, engine: DatabaseEngine) -> None:
        self.engine = engine

    def _session(self) -> Session:
        return open_session(self.engine)

    def conversations(self, search: str = "", limit: int | None = 200) -> list[ConversationRow]:
        """Sessions, latest activity first (see `bot.storage.conversation_list`)."""
        return conversations(self.engine, search, limit)

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
