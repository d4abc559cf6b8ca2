"""What the operator's console shows and does, as plain data (the web admin renders it).

Reads come from the stores and the context records; the two things an operator may
change go through the same paths chat commands use and leave the same records: a
persona switch is stored as the `/persona` event, forgetting a memory item removes the
item and stores an event in the conversation it came from. Nothing here deletes or
rewrites a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot import lanes as lane_registry
from bot.commands.personas import switch_persona
from bot.errors import NotFound, UnknownPersona
from bot.providers.observed import ObservedProvider
from bot.reminders.service import view as reminder_view
from bot.storage.approval_models import Approval
from bot.storage.context_models import SUMMARY, ContextRecord, ContextSnip
from bot.storage.message_append import NewMessage
from bot.storage.message_rows import attachment_ref, decode_calls
from bot.storage.models import ChatSession
from bot.storage.overview import TOOL_CALL_ROWS, Overview, ToolCallRow
from bot.storage.owners import Owner
from bot.storage.reminders import ACTIVE_STATES
from bot.tools.offer import schemas_of
from bot.turns.round_calls import progress_summary
from transcript import (
    CONTEXT_COUNT,
    AttachmentRef,
    Capabilities,
    Collapse,
    Context,
    Snip,
    TranscriptRow,
    billed_data,
    build_context,
    prefix_data,
    project_view,
    window_step_seq,
)
from transcript.audio import render_audio
from transcript.kinds import EVENT_KINDS, is_reply, message_kind
from transcript.rows import AUDIO_KINDS

if TYPE_CHECKING:
    from bot.runtime import Runtime

# The chart replays at most this many of a conversation's latest turns.
CHART_TURNS = 300
OPERATOR = "operator"


@dataclass(frozen=True)
class TurnPoint:
    seq: int  # the reply's seq
    at: str
    tokens: int
    persona_id: str | None
    # The prompt tokens the server evaluated afresh for the reply (its calls together) and
    # reused from its prompt cache; None when it did not say.
    evaluated: int | None = None
    reused: int | None = None


class Console:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.engine = runtime.engine
        self.stores = runtime.stores
        self.overview = Overview(runtime.database)
        # Each public method crosses the database boundary itself, as `bot.history` and
        # `bot.visitors` do: the lanes await it and never touch the database.
        self.db = runtime.engine.db

    # --- tool calls ---------------------------------------------------------------

    async def tool_calls(self, before: int | None = None, limit: int = TOOL_CALL_ROWS) -> dict[str, Any]:
        """Every call the model made, newest first, `limit` call rows at a time: who asked, and
        for a call that waited for a yes, who decided and when. `next` pages on to older calls."""
        return await self.db.run(self._tool_calls, before, limit)

    def _tool_calls(self, before: int | None = None, limit: int = TOOL_CALL_ROWS) -> dict[str, Any]:
        rows = self.overview.tool_calls(limit, before)
        approvals = {
            (approval.session_id, approval.call_seq, approval.call_id): approval
            for approval in self.stores.approvals.of_calls((row.session_id, row.seq) for row in rows)
        }
        older = min((row.row_id for row in rows), default=None)
        return {
            "calls": [
                _tool_call_entry(row, approvals.get((row.session_id, row.seq, row.call.id))) for row in rows
            ],
            "next": older if len({row.row_id for row in rows}) == limit else None,
        }

    async def decide(self, approval_id: int, approved: bool) -> dict[str, Any]:
        """The operator's yes or no to a call waiting for one; it counts once, like a click."""
        decided = await self.engine.approvals.decide(approval_id, approved, OPERATOR, operator=True)
        if decided.approval is None:
            raise NotFound(decided.text)
        return {"decided": decided.ok, "state": decided.approval.state, "text": decided.text}

    # --- conversations -----------------------------------------------------------

    async def conversations(self, search: str = "") -> list[dict[str, Any]]:
        return await self.db.run(self._conversations, search)

    def _conversations(self, search: str = "") -> list[dict[str, Any]]:
        return [
            {
                "id": row.session.id,
                "kind": row.session.kind,
                "title": row.session.title,
                "lanes": list(row.lanes),
                "participants": list(row.participants),
                "message_count": row.message_count,
                "last_activity": _iso(row.last_activity),
                "persona_id": self.engine.persona_for(row.session).id,
            }
            for row in self.overview.conversations(search.strip())
        ]

    def _session(self, session_id: str) -> ChatSession:
        found = self.stores.sessions.get_session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id}")
        return found

    async def transcript(self, session_id: str) -> dict[str, Any]:
        """Every stored row, with context records and snips placed after the range they cover."""
        return await self.db.run(self._transcript, session_id)

    def _transcript(self, session_id: str) -> dict[str, Any]:
        session = self._session(session_id)
        messages = self.stores.messages.messages(session.id)
        files = self.stores.messages.attachments_for(
            message.id for message in messages if message.id is not None
        )
        placed: dict[int, list[dict[str, Any]]] = {}
        for record in self.overview.records(session.id):
            placed.setdefault(record.last_seq, []).append(_record_entry(record))
        for snip in self.overview.snips(session.id):
            placed.setdefault(snip.last_seq, []).append(_snip_entry(snip))
        # Each decision shows beside the call it decided.
        decisions = {
            (approval.call_seq, approval.call_id): _approval_entry(approval)
            for approval in self.stores.approvals.of_session(session.id)
        }
        entries: list[dict[str, Any]] = []
        for message in messages:
            entries.append(
                {
                    "type": "event" if message_kind(message.kind) in EVENT_KINDS else "message",
                    "kind": message.kind,
                    "seq": message.seq,
                    "role": message.role,
                    "content": message.content,
                    "persona_id": message.persona_id,
                    "sender_name": message.sender_name,
                    "lane": message.lane,
                    "status": message.status,
                    "created_at": _iso(message.created_at),
                    # The operator sees what the model did: each call with its arguments, each result.
                    "tool_calls": [
                        {
                            "id": call.id,
                            "name": call.name,
                            "arguments": call.arguments,
                            "approval": decisions.get((message.seq, call.id)),
                        }
                        for call in decode_calls(message.tool_calls)
                    ],
                    "tool_call_id": message.tool_call_id,
                    "tool_name": message.tool_name,
                    # The model that answered a reply (a fallback's, when the usual one could not).
                    "model": message.model,
                    "attachments": [
                        {
                            "id": attachment.id,
                            "kind": attachment.kind,
                            "filename": attachment.filename,
                            "mime_type": attachment.mime_type,
                            "size": attachment.size,
                            "has_text": bool(attachment.text),
                            # A voice note's part, as the model reads it: its transcript or placeholder.
                            **(
                                {"heard": render_audio(attachment_ref(attachment))}
                                if attachment.kind in AUDIO_KINDS
                                else {}
                            ),
                        }
                        for attachment in files.get(message.id or 0, [])
                    ],
                }
            )
            entries.extend(placed.pop(message.seq, []))
        for leftover in sorted(placed):
            entries.extend(placed[leftover])
        # What this conversation will hear unprompted, soonest first.
        upcoming = self.stores.reminders.of_session(session.id, ACTIVE_STATES)
        return {
            "session": self._session_info(session),
            "entries": entries,
            "reminders": [reminder_view(reminder).as_json() for reminder in upcoming],
        }

    async def attachment(self, attachment_id: int) -> tuple[str, str, str | None]:
        """(file path, mime type, extracted text) of a stored attachment."""
        return await self.db.run(self._attachment, attachment_id)

    def _attachment(self, attachment_id: int) -> tuple[str, str, str | None]:
        found = self.stores.messages.get_attachment(attachment_id)
        if found is None:
            raise NotFound(f"no attachment {attachment_id}")
        path = self.engine.attachments.path_of(found.path)
        return str(path), found.mime_type, found.text

    # --- context -------------------------------------------------------------------

    async def context(self, session_id: str) -> dict[str, Any]:
        session = await self.db.run(self._session, session_id)
        built = await self.engine.inspect(session)
        return await self.db.run(self._context_report, session, built)

    def _context_report(self, session: ChatSession, built: Context) -> dict[str, Any]:
        persona = self.engine.persona_for(session)
        model = self.engine.conversation_model(session, persona)
        settings = self.runtime.settings
        window = self.engine.assembler.windows.info(model.model)
        stats = built.stats
        parts = stats.tokens
        last_turn = self.stores.messages.last_turn_billed(session.id)
        return {
            "session": self._session_info(session),
            "model": model.model,
            "model_choice": model.choice,
            "thinking": session.thinking,
            "window_tokens": window.window,
            "window_note": window.describe(),
            "left_out": [str(note) for note in stats.shed],
            "reply_reserve_tokens": window.reply_reserve,
            "budget_tokens": stats.budget_tokens,
            "total_tokens": stats.total_tokens,
            "parts": {
                "system prompt": parts.system,
                "summary": parts.summary,
                "memory": parts.memory,
                "recall": parts.recall,
                "documents": parts.documents,
                "history": parts.history,
                "attachments": parts.attachments,
                "tool schemas": parts.tools,
            },
            "messages_kept": stats.messages_kept,
            "messages_dropped": stats.messages_dropped,
            "compact_share": settings.context.compact_share,
            "collapse_share": settings.context.collapse_share,
            "turns": [point.__dict__ for point in self.turn_history(session)],
            "marks": self._marks(session),
            # What the server reused and evaluated of the last turn's prompt (None: not reported).
            "last_turn": billed_data(last_turn),
            # What this conversation's requests since the start did to the prompt prefix (None: unknown).
            "prompt_prefix": prefix_data(self.engine.rounds.prefixes.history(session.id)),
        }

    def turn_history(self, session: ChatSession) -> list[TurnPoint]:
        """Context tokens of each past turn, rebuilt from the rows and records as they were then.

        Memory and recall are left out (they depend on other conversations' state at that
        time); everything else goes through the same `build_context` the engine uses.
        """
        rows = self.stores.messages.rows_between(session.id, 1, session.last_seq)
        records = self.overview.records(session.id)
        snips = self.overview.snips(session.id)
        replies = [index for index, row in enumerate(rows) if is_reply(row.kind, row.role)][-CHART_TURNS:]
        assembler = self.engine.assembler
        billed = self.stores.messages.billed_replies(session.id, rows[replies[0]].seq) if replies else {}
        points: list[TurnPoint] = []
        for index in replies:
            reply = rows[index]
            before = rows[:index]
            if not before:
                continue
            moment = _parse(before[-1].created_at)
            persona = self.engine.personas.resolve(reply.persona_id)
            tools = schemas_of(assembler.offered_tools(session, persona).tools)
            summary = _summary_at(records, moment)
            after = summary.last_seq if summary is not None else 0
            collapses = [
                Collapse(record.first_seq, record.last_seq, record.text)
                for record in records
                if record.kind != SUMMARY and record.first_seq > after and _aware(record.created_at) <= moment
            ]
            # Twice the window: a stepped window starts at a mark up to a window before the turn.
            projected = project_view(
                [row for row in before if row.seq > after],
                collapses=collapses,
                snips=_snips_at(snips, moment),
            )[-2 * CONTEXT_COUNT :]
            budget = assembler.budget_for(session, persona, tools)
            # A summary stored since the window's last step followed the history, as in the turn.
            shown, new_summary = summary, None
            step_seq = window_step_seq(projected, budget=budget, group=session.kind == "group")
            step_row = next((row for row in projected if row.seq == step_seq), None)
            if summary is not None and step_row is not None and step_row.created_at is not None:
                step = _parse(step_row.created_at)
                if _aware(summary.created_at) > step:
                    shown, new_summary = _summary_at(records, step), summary.text
            built = build_context(
                projected,
                persona=persona,
                budget=budget,
                capabilities=Capabilities(vision=False, tools=bool(tools)),
                group=session.kind == "group",
                summary=shown.text if shown is not None else None,
                documents=_documents(before),
                new_summary=new_summary,
            )
            served = billed.get(reply.seq)
            points.append(
                TurnPoint(
                    reply.seq,
                    reply.created_at or "",
                    built.stats.total_tokens,
                    persona.id,
                    evaluated=served.evaluated if served is not None else None,
                    reused=served.cache_read if served is not None else None,
                )
            )
        return points

    def _marks(self, session: ChatSession) -> list[dict[str, Any]]:
        return [
            {
                "kind": "compaction" if record.kind == SUMMARY else "collapse",
                "first_seq": record.first_seq,
                "last_seq": record.last_seq,
                "at": _iso(record.created_at),
            }
            for record in self.overview.records(session.id)
        ]

    # --- memory --------------------------------------------------------------------

    async def memory(self, search: str = "", session_id: str | None = None) -> list[dict[str, Any]]:
        return await self.db.run(self._memory, search, session_id)

    def _memory(self, search: str = "", session_id: str | None = None) -> list[dict[str, Any]]:
        owners: list[tuple[str, str]] = []
        if session_id:
            owner = Owner.of(self._session(session_id))
            owners.append((owner.kind, owner.id))
        return [
            {
                "id": item.id,
                "owner": f"{item.owner_kind}:{item.owner_id}",
                "kind": item.kind,
                "importance": item.importance,
                "content": item.content,
                "created_at": _iso(item.created_at),
                "updated_at": _iso(item.updated_at),
                "session_id": item.session_id,
                "source_seq": item.source_seq,
                "mentions": item.mentions,
                "source": item.source,
            }
            for item in self.overview.memory_items(owners, search.strip())
        ]

    async def forget(self, item_id: int) -> None:
        """Remove a memory item and record that in the conversation it was taken from."""
        await self.db.run(self._forget, item_id)

    def _forget(self, item_id: int) -> None:
        item = self.overview.memory_item(item_id)
        if item is None or self.runtime.memory is None:
            raise NotFound(f"no memory item {item_id}")
        owner = Owner(kind=item.owner_kind, id=item.owner_id)
        if not self.runtime.memory.store.delete_item(owner, item_id):
            raise NotFound(f"no memory item {item_id}")
        self.stores.messages.append(
            item.session_id,
            NewMessage(
                role="system",
                kind="note",
                content=f"memory item #{item_id} ({item.kind}) forgotten by the operator",
                token_count=0,
                sender_name=OPERATOR,
            ),
        )

    # --- access --------------------------------------------------------------------

    async def pairings(self) -> list[dict[str, Any]]:
        """Strangers waiting with a pairing code, oldest first (docs/access.md)."""
        return await self.db.run(self._pairings)

    def _pairings(self) -> list[dict[str, Any]]:
        return [
            {
                "code": pending.code,
                "lane": pending.lane,
                "user_id": pending.platform_user_id,
                "name": pending.display_name,
                "expires_at": _iso(pending.expires_at),
            }
            for pending in self.stores.pairings.pending()
        ]

    async def approve_pairing(self, code: str) -> dict[str, str]:
        """Approve a waiting code: its stranger becomes a member."""
        return await self.db.run(self._approve_pairing, code)

    def _approve_pairing(self, code: str) -> dict[str, str]:
        approved = self.stores.pairings.approve(code)
        if approved is None:
            raise NotFound(f"no pairing code {code} is waiting")
        return {"lane": approved.lane, "user_id": approved.platform_user_id, "name": approved.display_name}

    # --- personas ------------------------------------------------------------------

    async def personas(self) -> list[dict[str, Any]]:
        return await self.db.run(self._personas)

    def _personas(self) -> list[dict[str, Any]]:
        replies = self.overview.persona_turns()
        active = self.overview.persona_sessions()
        default = self.engine.personas.default.id
        return [
            {
                "id": persona.id,
                "name": persona.name,
                "model": self.engine.settings.model.model_for(persona.model),
                "default": persona.id == default,
                "replies": replies.get(persona.id, 0),
                "active_sessions": active.get(persona.id, 0)
                + (active.get("", 0) if persona.id == default else 0),
            }
            for persona in self.engine.personas
        ]

    async def switch_persona(self, session_id: str, persona_id: str) -> str:
        """Switch like `/persona <id>`; returns the persona now speaking."""
        return await self.db.run(self._switch_persona, session_id, persona_id)

    def _switch_persona(self, session_id: str, persona_id: str) -> str:
        session = self._session(session_id)
        chosen = self.engine.personas.get(persona_id)
        if chosen is None:
            raise UnknownPersona(persona_id, self.engine.personas.ids())
        current = self.engine.persona_for(session)
        if chosen.id != current.id:
            switch_persona(
                self.stores,
                session.id,
                current.id,
                chosen.id,
                sender_id=None,
                sender_name=OPERATOR,
                lane=None,
            )
        return chosen.id

    # --- health ----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        provider = self.engine.provider
        errors = provider.recent_errors if isinstance(provider, ObservedProvider) else ()
        return {
            "lanes": self.lanes(),
            "model": {
                "provider": provider.name,
                "name": self.runtime.settings.model.name,
                "recent_errors": [
                    {
                        "at": _iso(error.at),
                        "kind": error.kind,
                        "message": error.message,
                        "purpose": error.purpose,
                    }
                    for error in reversed(errors)
                ],
            },
            "jobs": {"queued": job_queue_depth(self.runtime)},
            "mcp_servers": [
                {
                    "name": server.name,
                    "transport": server.transport,
                    "state": server.state,
                    "tools": list(server.tools),
                    "last_error": server.last_error,
                    "restarts": server.restarts,
                    "since": _iso(server.since),
                }
                for server in self.runtime.mcp_servers.health()
            ],
        }

    def lanes(self) -> list[dict[str, str]]:
        """Every lane Chorus knows: the state it reported (running, starting, down or failed and why),
        else whether these settings run it (a lane that reports no state yet is configured)."""
        channels = self.runtime.settings.channels
        active = {spec.name for spec in lane_registry.active_lanes(channels)}
        reported = self.runtime.lanes.snapshot()
        states = []
        for spec in lane_registry.lanes():
            status = reported.get(spec.name)
            if status is not None:
                states.append({"name": spec.name, "state": status.state, "reason": status.reason or ""})
            else:
                states.append(
                    {"name": spec.name, "state": "configured" if spec.name in active else "off", "reason": ""}
                )
        return states

    def _session_info(self, session: ChatSession) -> dict[str, Any]:
        return {
            "id": session.id,
            "kind": session.kind,
            "title": session.title,
            "persona_id": self.engine.persona_for(session).id,
            "last_seq": session.last_seq,
        }


def job_queue_depth(runtime: Runtime) -> int:
    """After-turn jobs due or running (on PostgreSQL, those of every process)."""
    return runtime.engine.pending_jobs


def _approval_entry(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.id,
        "session_id": approval.session_id,
        "tool": approval.tool_name,
        "summary": approval.summary,
        "asked_by": approval.asker_name or approval.asker,
        "asker": approval.asker,
        "asked_at": _iso(approval.created_at),
        "state": approval.state,
        "decided_by": approval.decided_by,
        "decided_at": _iso(approval.decided_at),
        "expires_at": _iso(approval.expires_at),
        "result": approval.outcome,
    }


def _tool_call_entry(row: ToolCallRow, approval: Approval | None) -> dict[str, Any]:
    entry = {
        "session_id": row.session_id,
        "seq": row.seq,
        "call_id": row.call.id,
        "tool": row.call.name,
        "summary": progress_summary(row.call),
        "asked_by": row.asker_name or row.asker_id,
        "lane": row.lane,
        "called_at": _iso(row.created_at),
        "result": _call_result(row, approval),
        "result_at": _iso(row.result_at),
        "approval": None,
    }
    if approval is not None:
        entry["approval"] = {
            "id": approval.id,
            "state": approval.state,
            "decided_by": approval.decided_by,
            "decided_at": _iso(approval.decided_at),
        }
    return entry


def _call_result(row: ToolCallRow, approval: Approval | None) -> str | None:
    """How the call ended: ok, error, not run (no yes came), or None while it has no result."""
    if row.result_status is None:
        return None
    if approval is not None and approval.state != "approved":
        return "not run"
    return "error" if row.result_status == "failed" else "ok"


def _record_entry(record: ContextRecord) -> dict[str, Any]:
    return {
        "type": "compaction" if record.kind == SUMMARY else "collapse",
        "first_seq": record.first_seq,
        "last_seq": record.last_seq,
        "content": record.text,
        "tokens": record.token_count,
        "focus": record.focus,
        "created_at": _iso(record.created_at),
    }


def _snip_entry(snip: ContextSnip) -> dict[str, Any]:
    return {
        "type": "snip",
        "first_seq": snip.first_seq,
        "last_seq": snip.last_seq,
        "created_at": _iso(snip.created_at),
        "undone_at": _iso(snip.undone_at) if snip.undone_at else None,
    }


def _summary_at(records: Sequence[ContextRecord], moment: datetime) -> ContextRecord | None:
    summaries = [r for r in records if r.kind == SUMMARY and _aware(r.created_at) <= moment]
    return max(summaries, key=lambda record: record.last_seq) if summaries else None


def _snips_at(snips: Sequence[ContextSnip], moment: datetime) -> list[Snip]:
    return [
        Snip(snip.first_seq, snip.last_seq)
        for snip in snips
        if _aware(snip.created_at) <= moment and (snip.undone_at is None or _aware(snip.undone_at) > moment)
    ]


def _documents(rows: Sequence[TranscriptRow]) -> list[AttachmentRef]:
    return [attachment for row in rows for attachment in row.attachments if attachment.kind == "document"]


def _aware(moment: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; they were stored in UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _parse(text: str | None) -> datetime:
    return _aware(datetime.fromisoformat(text)) if text else datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    return _aware(moment).isoformat() if moment is not None else None
