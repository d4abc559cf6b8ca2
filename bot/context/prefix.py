"""The conversation's last model request, rebuilt from stored rows for the after-turn requests.

Compaction, collapse and memory distillation start their requests with it
(`transcript.after_turn`): the rows before the newest reply are built as the turn built
them (the same `ContextAssembler` path, the reply's persona, the tools a turn offers),
and the reply follows as the next turn shows it. Nothing is kept between jobs: every
job rebuilds it, so any process that runs the job sends the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from bot.config import Audience
from bot.providers.after_turn import SharedPrefix
from bot.providers.base import tool_name
from bot.storage.context_records import ContextView
from bot.storage.models import ChatSession
from bot.tools.offer import schemas_of
from bot.turns.assembly import ContextAssembler
from persona import PersonaRegistry
from transcript import CONTEXT_COUNT, TranscriptRow
from transcript.after_turn import conversation_prefix, last_reply

# The audience a session's turns have now (store calls); see `Access.audience_of_session`.
AudienceOf = Callable[[ChatSession], Audience]


class LastRequests:
    """Rebuilds a session's last model request (and its reply) from its stored rows."""

    def __init__(
        self, assembler: ContextAssembler, personas: PersonaRegistry, audience_of: AudienceOf | None = None
    ) -> None:
        self.assembler = assembler
        self.personas = personas
        # Who asks decides which tools a turn offers; None: a group's, or a member's in private.
        self.audience_of = audience_of

    async def prefix(self, session: ChatSession) -> SharedPrefix | None:
        """The last request and its reply, or None when no reply follows the summary."""
        # A stepped window starts at a mark up to a whole window before the reply: read enough
        # rows that the rows before the reply still hold a window's worth, as the turn's did.
        view = await self.assembler.db.run(self.assembler.view, session.id, None, (), 2 * CONTEXT_COUNT)
        reply = last_reply(view.projected)
        if reply is None:
            return None
        persona = self.personas.resolve(reply.persona_id)
        audience = await self.assembler.db.run(self.audience_of, session) if self.audience_of else None
        schemas = schemas_of(self.assembler.offered_tools(session, persona, audience).tools)
        # The turn's last call saw the rows before its reply (its own thinking, stored after
        # the call, is an event the model never sees).
        _, request = await self.assembler.assemble_view(
            session, persona, _up_to(view, reply.seq - 1), tools=schemas
        )
        following = await self.assembler.db.run(
            self.assembler.assemble_now, session, persona, _up_to(view, reply.seq), schemas
        )
        shared = conversation_prefix(request, following)
        if shared is None:
            return None
        offered = tuple(schema for schema in schemas if tool_name(schema) in shared.tools)
        return SharedPrefix(shared, offered)


def _up_to(view: ContextView, last_seq: int) -> ContextView:
    """`view` as it was when `last_seq` was its newest row."""
    return dataclasses.replace(
        view, rows=_through(view.rows, last_seq), projected=_through(view.projected, last_seq)
    )


def _through(rows: Sequence[TranscriptRow], last_seq: int) -> list[TranscriptRow]:
    return [row for row in rows if row.seq <= last_seq]
