"""Reads and writes of context records (summaries, collapses) and snips.

Inserts never overlap: a summary only extends the newest one, a collapse only
takes a range no other collapse touches; a process that loses a race gets
None back and nothing is stored twice.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import bindparam, func, update
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.storage.context_models import COLLAPSE, SUMMARY, ContextRecord, ContextSnip
from bot.storage.database import open_session
from bot.storage.messages import MessageStore
from bot.storage.models import table_of, utcnow
from transcript import Collapse, Snip, TranscriptRow, TurnMemo, count_tokens, project_view

RECORDS = table_of(ContextRecord)
SNIPS = table_of(ContextSnip)


# Read on every model call, so built once (see bot/storage/messages.py). Each is one step
# of an index (migration 0016), however many records the session has stored.
_SUMMARY_SEQ = (
    select(func.max(RECORDS.c.last_seq))
    .where(RECORDS.c.session_id == bindparam("session_id"), RECORDS.c.kind == SUMMARY)
    .scalar_subquery()
)
LATEST_SUMMARY_SEQ = select(func.coalesce(_SUMMARY_SEQ, 0))
LATEST_SUMMARY = (
    select(*RECORDS.c)
    .where(RECORDS.c.session_id == bindparam("session_id"), RECORDS.c.kind == SUMMARY)
    .order_by(RECORDS.c.last_seq.desc())
    .limit(1)
)
COLLAPSES_AFTER = (
    select(RECORDS.c.first_seq, RECORDS.c.last_seq, RECORDS.c.text)
    .where(
        RECORDS.c.session_id == bindparam("session_id"),
        RECORDS.c.kind == COLLAPSE,
        RECORDS.c.first_seq > bindparam("after"),
    )
    .order_by(RECORDS.c.first_seq)
)
ACTIVE_SNIPS = (
    select(SNIPS.c.first_seq, SNIPS.c.last_seq)
    .where(SNIPS.c.session_id == bindparam("session_id"), SNIPS.c.undone_at.is_(None))
    .order_by(SNIPS.c.id)
)


@dataclass(frozen=True)
class ContextView:
    """A session's context state: the latest summary, what follows it, and its projection."""

    summary: ContextRecord | None
    collapses: list[Collapse]  # ranges after the summary, oldest first
    snips: list[Snip]
    rows: list[TranscriptRow]  # stored rows after the summary, oldest first
    projected: list[TranscriptRow]  # `rows` as the model sees them
    # This process's tick of the session's records when they were read (see `RecordChanges`).
    changes: int = 0
    # The rows' model turns, kept for the builds of the views extending this one (one turn's).
    turns: TurnMemo = field(default_factory=TurnMemo, compare=False, repr=False)

    @property
    def summary_last_seq(self) -> int:
        return self.summary.last_seq if self.summary is not None else 0

    @property
    def summary_text(self) -> str | None:
        return self.summary.text if self.summary is not None else None


class RecordChanges:
    """When this process last changed each session's summaries, collapses or snips.

    A tool round extends the view of the turn's previous model call only while this
    says nothing changed since. Writes of other processes are not seen here, and need
    not be: one landing during the turn reads the same as one landing just after it.
    Bounded to `MAX_SESSIONS`: a forgotten session reads as changed at the newest
    forgotten tick, so a view read before a change never looks current after it.
    """

    MAX_SESSIONS = 10_000

    def __init__(self) -> None:
        self._ticks = itertools.count(1)
        self._latest: OrderedDict[str, int] = OrderedDict()
        self._forgotten = 0
        self._lock = threading.Lock()

    def of(self, session_id: str) -> int:
        with self._lock:
            return self._latest.get(session_id, self._forgotten)

    def changed(self, session_id: str) -> None:
        with self._lock:
            self._latest[session_id] = next(self._ticks)
            self._latest.move_to_end(session_id)
            if len(self._latest) > self.MAX_SESSIONS:
                _, self._forgotten = self._latest.popitem(last=False)


class ContextRecords:
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database
        self.changes = RecordChanges()

    def _session(self) -> Session:
        return open_session(self.database)

    # --- reading --------------------------------------------------------------

    def latest_summary(self, session_id: str) -> ContextRecord | None:
        with self._session() as db:
            return db.exec(
                select(ContextRecord)
                .where(ContextRecord.session_id == session_id, ContextRecord.kind == SUMMARY)
                .order_by(col(ContextRecord.last_seq).desc())
                .limit(1)
            ).first()

    def summary_as_of(self, session_id: str, moment: datetime) -> ContextRecord | None:
        """The newest summary of the session stored at or before `moment` (a window step's)."""
        with self._session() as db:
            return db.exec(
                select(ContextRecord)
                .where(
                    ContextRecord.session_id == session_id,
                    ContextRecord.kind == SUMMARY,
                    col(ContextRecord.created_at) <= moment,
                )
                .order_by(col(ContextRecord.last_seq).desc())
                .limit(1)
            ).first()

    def latest_summary_seq(self, session_id: str) -> int:
        """The last message seq the newest summary covers (0 without a summary)."""
        with self.database.connect() as connection:
            return int(connection.execute(LATEST_SUMMARY_SEQ, {"session_id": session_id}).scalar_one())

    def summary_updates(self, session_id: str) -> int:
        with self._session() as db:
            return db.exec(
                select(func.count())
                .select_from(ContextRecord)
                .where(ContextRecord.session_id == session_id, ContextRecord.kind == SUMMARY)
            ).one()

    def collapses(self, session_id: str, after_seq: int = 0) -> list[Collapse]:
        """Collapsed ranges starting after `after_seq`, oldest first."""
        with self._session() as db:
            return [
                Collapse(record.first_seq, record.last_seq, record.text)
                for record in db.exec(
                    select(ContextRecord)
                    .where(
                        ContextRecord.session_id == session_id,
                        ContextRecord.kind == COLLAPSE,
                        ContextRecord.first_seq > after_seq,
                    )
                    .order_by(col(ContextRecord.first_seq))
                )
            ]

    def snips(self, session_id: str) -> list[Snip]:
        """Snips in force, oldest first."""
        with self._session() as db:
            return [
                Snip(snip.first_seq, snip.last_seq)
                for snip in db.exec(
                    select(ContextSnip)
                    .where(ContextSnip.session_id == session_id, col(ContextSnip.undone_at).is_(None))
                    .order_by(col(ContextSnip.id))
                )
            ]

    def view(
        self,
        messages: MessageStore,
        session_id: str,
        window_entries: int,
        earlier: ContextView | None = None,
        appended: Sequence[TranscriptRow | None] = (),
    ) -> ContextView:
        """The context state, with just enough stored rows for `window_entries` projected entries.

        Built on every model call: three indexed queries for the records, then the
        rows after the summary — each collapsed range shows as one entry and a snipped
        message as none, so those ranges add to what is loaded.

        A tool round passes the `earlier` view of the same turn's previous model call and
        the rows it `appended` since (as `MessageStore.append` returned them). While this
        process changed no summary, collapse or snip of the session, the view is extended
        instead of read again: with the appended rows when their seqs follow the view's
        last row without a gap (no one else stored a row between), else with the rows
        stored after it. The window keeps the newest units, so the extra older rows give
        the model the same messages.
        """
        changes = self.changes.of(session_id)
        if earlier is not None and earlier.rows and earlier.changes == changes:
            following = _following(earlier.rows[-1].seq, appended)
            if following is None:
                following = messages.rows_after(session_id, earlier.rows[-1].seq)
            rows = [*earlier.rows, *following]
            return ContextView(
                summary=earlier.summary,
                collapses=earlier.collapses,
                snips=earlier.snips,
                rows=rows,
                projected=project_view(rows, collapses=earlier.collapses, snips=earlier.snips),
                changes=changes,
                turns=earlier.turns,
            )
        with self.database.connect() as connection:
            latest = connection.execute(LATEST_SUMMARY, {"session_id": session_id}).first()
            summary = ContextRecord(**latest._mapping) if latest is not None else None
            after = summary.last_seq if summary is not None else 0
            collapses = [
                Collapse(row.first_seq, row.last_seq, row.text)
                for row in connection.execute(COLLAPSES_AFTER, {"session_id": session_id, "after": after})
            ]
            snips = [
                Snip(row.first_seq, row.last_seq)
                for row in connection.execute(ACTIVE_SNIPS, {"session_id": session_id})
            ]
        hidden = sum(c.last_seq - c.first_seq for c in collapses) + sum(
            snip.last_seq - max(snip.first_seq, after + 1) + 1 for snip in snips if snip.last_seq > after
        )
        rows = messages.recent_rows(session_id, window_entries + hidden, after_seq=after)
        return ContextView(
            summary=summary,
            collapses=collapses,
            snips=snips,
            rows=rows,
            projected=project_view(rows, collapses=collapses, snips=snips),
            changes=changes,
        )

    # --- writing --------------------------------------------------------------

    def add_summary(
        self, session_id: str, first_seq: int, last_seq: int, text: str, focus: str | None = None
    ) -> ContextRecord | None:
        """Store a summary that extends the newest one; None if another got there first."""
        record = ContextRecord(
            session_id=session_id,
            kind=SUMMARY,
            first_seq=first_seq,
            last_seq=last_seq,
            text=text,
            token_count=count_tokens(text),
            focus=focus[:500] if focus else None,
        )
        with self._session() as db:
            newer = db.exec(
                select(ContextRecord.id).where(
                    ContextRecord.session_id == session_id,
                    ContextRecord.kind == SUMMARY,
                    ContextRecord.last_seq >= first_seq,
                )
            ).first()
            stored = None if newer is not None else _insert(db, record)
        if stored is not None:
            self.changes.changed(session_id)
        return stored

    def add_collapse(self, session_id: str, first_seq: int, last_seq: int, text: str) -> ContextRecord | None:
        """Store a collapse unless its range overlaps a stored one (then None)."""
        record = ContextRecord(
            session_id=session_id,
            kind=COLLAPSE,
            first_seq=first_seq,
            last_seq=last_seq,
            text=text,
            token_count=count_tokens(text),
        )
        with self._session() as db:
            overlapping = db.exec(
                select(ContextRecord.id).where(
                    ContextRecord.session_id == session_id,
                    ContextRecord.kind == COLLAPSE,
                    ContextRecord.first_seq <= last_seq,
                    ContextRecord.last_seq >= first_seq,
                )
            ).first()
            stored = None if overlapping is not None else _insert(db, record)
        if stored is not None:
            self.changes.changed(session_id)
        return stored

    def add_snip(self, session_id: str, first_seq: int, last_seq: int) -> ContextSnip:
        snip = ContextSnip(session_id=session_id, first_seq=first_seq, last_seq=last_seq)
        with self._session() as db:
            db.add(snip)
            db.commit()
        self.changes.changed(session_id)
        return snip

    def undo_snips(
        self, session_id: str, *, every: bool = False, overlapping: tuple[int, int] | None = None
    ) -> Sequence[ContextSnip]:
        """Undo the newest snip in force, all of them, or those touching `overlapping` (first, last)."""
        with self._session() as db:
            query = (
                select(ContextSnip)
                .where(ContextSnip.session_id == session_id, col(ContextSnip.undone_at).is_(None))
                .order_by(col(ContextSnip.id).desc())
            )
            if overlapping is not None:
                first, last = overlapping
                query = query.where(ContextSnip.first_seq <= last, ContextSnip.last_seq >= first)
            undone = list(db.exec(query if every or overlapping is not None else query.limit(1)))
            if undone:
                db.execute(
                    update(ContextSnip)
                    .where(col(ContextSnip.id).in_([snip.id for snip in undone]))
                    .values(undone_at=utcnow())
                )
                db.commit()
        if undone:
            self.changes.changed(session_id)
        return undone


def _insert(db: Session, record: ContextRecord) -> ContextRecord | None:
    db.add(record)
    try:
        db.commit()
    except IntegrityError:
        # Another process stored the same step (same session, kind and first_seq).
        db.rollback()
        return None
    return record


def _following(last_seq: int, appended: Sequence[TranscriptRow | None]) -> list[TranscriptRow] | None:
    """The appended rows when they are exactly the rows stored after `last_seq`; else None."""
    rows = sorted((row for row in appended if row is not None), key=lambda row: row.seq)
    if len(rows) != len(appended):
        return None
    expected = range(last_seq + 1, last_seq + 1 + len(rows))
    return rows if all(row.seq == seq for row, seq in zip(rows, expected, strict=True)) else None
