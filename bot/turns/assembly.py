"""Gathers what a turn's context is built from, then calls `transcript`.

The engine, `/status` and `/context` all build the context here, so what they
show is exactly what the model gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from bot.config import Audience, Settings
from bot.conversation_model import ConversationModel, conversation_model
from bot.providers.base import ToolSchema, tool_name
from bot.storage.boundary import boundary_for
from bot.storage.context_records import ContextRecords, ContextView
from bot.storage.messages import MessageStore
from bot.storage.models import ChatSession, as_utc
from bot.tools.offer import OfferedTools, ToolOffer, schema_tokens, schemas_of
from bot.turns.attachments import AttachmentStore
from bot.windows import ModelWindows, WindowInfo
from persona import Persona
from transcript import (
    CONTEXT_COUNT,
    Budget,
    Capabilities,
    Context,
    ToolCost,
    TranscriptRow,
    build_context,
    window_step_seq,
)

# In a small window no one document, tool result or documents section may take more
# than this share of the prompt's room (the configured caps hold in a large one).
DOCUMENT_SHARE = 4
DOCUMENTS_TOTAL_SHARE = 2
TOOL_RESULT_SHARE = 4

if TYPE_CHECKING:
    from bot.memory import MemoryService
    from bot.memory.recall import TurnMemory


@dataclass(frozen=True)
class QueryToEmbed:
    """The view read so far, and the query recall needs embedded before the build."""

    view: ContextView
    query: str


class ContextAssembler:
    def __init__(
        self,
        settings: Settings,
        messages: MessageStore,
        records: ContextRecords,
        attachments: AttachmentStore,
        windows: ModelWindows,
        memory: MemoryService | None = None,
        tools: ToolOffer | None = None,
    ) -> None:
        self.settings = settings
        # Each model's window and calibrated count, which every budget is made from.
        self.windows = windows
        self.messages = messages
        self.attachments = attachments
        self.records = records
        # The tools a turn offers: their schemas take room, and they decide how exchanges are shown.
        self.tools = tools
        self.db = boundary_for(messages.database)
        # When long-term memory is on: the snapshot and recall of each turn.
        self.memory = memory

    def conversation_model(self, session: ChatSession, persona: Persona) -> ConversationModel:
        """The model this conversation speaks with (its /model choice, else the persona's)."""
        return conversation_model(self.settings, persona.model, session.model_choice)

    def window_for(self, session: ChatSession, persona: Persona) -> WindowInfo:
        """The window of the conversation's model as known now (refreshed before each model call)."""
        return self.windows.info(self.conversation_model(session, persona).model)

    def budget_for(
        self,
        session: ChatSession,
        persona: Persona,
        tools: Sequence[ToolSchema] = (),
        view: ContextView | None = None,
    ) -> Budget:
        """The caps of one request: the prompt's room in the model's window.

        The tools are listed most wanted first — those the persona called most recently in
        `view`, then the rest as offered — so a tight window sheds the least wanted first.
        """
        room = self.window_for(session, persona).budget_tokens
        context = self.settings.context
        return Budget(
            max_messages=CONTEXT_COUNT,
            low_water=context.low_water,
            max_tokens=room,
            max_chars=context.max_chars,
            document_tokens=min(context.document_tokens, room // DOCUMENT_SHARE),
            documents_total_tokens=min(context.documents_total_tokens, room // DOCUMENTS_TOTAL_SHARE),
            tool_result_tokens=max(min(self.settings.tools.result_max_tokens, room // TOOL_RESULT_SHARE), 1),
            tools=tool_costs(tools, recently_used(view, persona.id) if view is not None else ()),
            history_share=context.history_share,
        )

    def offered_tools(
        self, session: ChatSession, persona: Persona, audience: Audience | None = None
    ) -> OfferedTools:
        """The tools a turn of this persona in this session offers the model.

        `audience`: who asks (the engine knows); None, for a context shown rather than sent
        (/context, the console): a group's, or a member's in a private chat.
        """
        model = self.conversation_model(session, persona)
        if self.tools is None or not model.tools:
            return OfferedTools({})
        if audience is None:
            audience = "groups" if session.kind == "group" else "members"
        return self.tools.tools_for(persona, audience=audience, model=model.model)

    def view(
        self,
        session_id: str,
        earlier: ContextView | None = None,
        appended: Sequence[TranscriptRow | None] = (),
        entries: int = CONTEXT_COUNT,
    ) -> ContextView:
        """The rows after the latest summary, with collapses and snips applied.

        `earlier`: the view of the turn's previous model call, extended rather than read
        again, with the rows the turn `appended` since (see `ContextRecords.view`).
        `entries`: how many projected entries to load at least.
        """
        return self.records.view(self.messages, session_id, entries, earlier, appended)

    async def assemble(
        self,
        session: ChatSession,
        persona: Persona,
        view: ContextView | None = None,
        *,
        tools: Sequence[ToolSchema] | None = None,
    ) -> Context:
        return (await self.assemble_view(session, persona, view, tools=tools))[1]

    async def assemble_view(
        self,
        session: ChatSession,
        persona: Persona,
        view: ContextView | None = None,
        *,
        tools: Sequence[ToolSchema] | None = None,
        earlier: ContextView | None = None,
        appended: Sequence[TranscriptRow | None] = (),
    ) -> tuple[ContextView, Context]:
        """The context, and the view (read now unless given) it was built from.

        `tools` are the schemas the request carries; None: those a turn would offer.
        `earlier` is the view of the same turn's previous model call, and `appended` the
        rows the turn stored since (see `view`).
        """
        if tools is None:
            tools = schemas_of(self.offered_tools(session, persona).tools)
        # What every process learned of the model's window since, before the budget is made.
        await self.windows.refresh(self.conversation_model(session, persona).model)
        # Reads, recall, image data and the build itself are blocking work: one call on a
        # database thread. When recall needs the query's embedding (CPU work, on a thread
        # of its own), the build is a second call that starts meanwhile: its dense search
        # waits for the vector, its full-text search does not.
        built = await self.db.run(
            self._assemble_unless_embedding, session, persona, view, tools, earlier, appended
        )
        if isinstance(built, QueryToEmbed):
            if self.memory is not None:
                self.memory.embed_query_ahead(built.query)
            return built.view, await self.db.run(self.assemble_now, session, persona, built.view, tools)
        return built

    def _assemble_unless_embedding(
        self,
        session: ChatSession,
        persona: Persona,
        view: ContextView | None,
        tools: Sequence[ToolSchema],
        earlier: ContextView | None,
        appended: Sequence[TranscriptRow | None],
    ) -> tuple[ContextView, Context] | QueryToEmbed:
        view = view or self.view(session.id, earlier, appended)
        query = self.memory.query_to_embed(session, view.projected) if self.memory is not None else None
        if query is not None:
            return QueryToEmbed(view, query)
        return view, self.assemble_now(session, persona, view, tools)

    def assemble_now(
        self,
        session: ChatSession,
        persona: Persona,
        view: ContextView | None = None,
        tools: Sequence[ToolSchema] | None = None,
    ) -> Context:
        """`assemble`, for code that already runs off the event loop."""
        if tools is None:
            tools = schemas_of(self.offered_tools(session, persona).tools)
        view = view or self.view(session.id)
        budget = self.budget_for(session, persona, tools, view)
        step = self.step_moment(session, view, budget)
        remembered = (
            self.memory.for_turn(session, view.projected, budget.max_tokens, step)
            if self.memory is not None
            else None
        )
        return self._build(session, persona, view, tools, budget, remembered, step)

    def assemble_without_recall(
        self, session: ChatSession, persona: Persona, view: ContextView
    ) -> tuple[Context, int]:
        """The context of `view` with memory's snapshot but nothing recalled, and the tokens
        recall could have added (0 without memory). Runs off the event loop.
        """
        tools = schemas_of(self.offered_tools(session, persona).tools)
        budget = self.budget_for(session, persona, tools, view)
        step = self.step_moment(session, view, budget)
        if self.memory is None:
            return self._build(session, persona, view, tools, budget, None, step), 0
        remembered = self.memory.without_recall(session, step)
        allowance = self.memory.recall_allowance(budget.max_tokens)
        return self._build(session, persona, view, tools, budget, remembered, step), allowance

    def step_moment(self, session: ChatSession, view: ContextView, budget: Budget) -> datetime | None:
        """When the window last stepped: summaries and memory stored since follow the history.

        The time of a stored row (`transcript.window_step_seq`), so every process and lane
        splits alike; None for the rolling window, whose system message takes everything.
        """
        seq = window_step_seq(view.projected, budget=budget, group=session.kind == "group", memo=view.turns)
        row = next((row for row in view.projected if row.seq == seq), None) if seq is not None else None
        if row is None or row.created_at is None:
            return None
        return as_utc(datetime.fromisoformat(row.created_at))

    def _build(
        self,
        session: ChatSession,
        persona: Persona,
        view: ContextView,
        tools: Sequence[ToolSchema],
        budget: Budget,
        remembered: TurnMemory | None,
        step: datetime | None,
    ) -> Context:
        rows = view.projected
        summary, new_summary = view.summary, None
        if step is not None and summary is not None and as_utc(summary.created_at) > step:
            # Stored since the window's last step: it follows the history until the next one.
            new_summary, summary = summary.text, self.records.summary_as_of(session.id, step)
        vision = self.conversation_model(session, persona).vision
        if vision:
            rows = [self._with_image_data(row) for row in rows]
        return build_context(
            rows,
            persona=persona,
            budget=budget,
            # With no tools offered the model is sent no tool messages: exchanges become text.
            capabilities=Capabilities(vision=vision, tools=bool(budget.tools)),
            group=session.kind == "group",
            documents=self.messages.session_documents(session.id) if session.document_count else (),
            summary=summary.text if summary is not None else None,
            memory=remembered.snapshot if remembered is not None else None,
            recall=remembered.recall if remembered is not None else (),
            memo=view.turns,
            new_summary=new_summary,
            new_memory=remembered.new_snapshot if remembered is not None else None,
        )

    def _with_image_data(self, row: TranscriptRow) -> TranscriptRow:
        if not any(attachment.kind == "image" for attachment in row.attachments):
            return row
        return replace(
            row,
            attachments=tuple(
                replace(attachment, data_url=self.attachments.image_data_url(attachment.sha256))
                if attachment.kind == "image"
                else attachment
                for attachment in row.attachments
            ),
        )


def tool_costs(tools: Sequence[ToolSchema], used: Sequence[str]) -> tuple[ToolCost, ...]:
    """Each schema and its tokens, those in `used` first (in its order), then the rest as given."""
    rank = {name: index for index, name in enumerate(used)}
    ordered = sorted(tools, key=lambda schema: rank.get(tool_name(schema), len(rank)))
    return tuple(ToolCost(tool_name(schema), schema_tokens([schema])) for schema in ordered)


def recently_used(view: ContextView, persona_id: str) -> list[str]:
    """The tools `persona_id` called in `view`, the most recent first, each once."""
    used: list[str] = []
    for row in reversed(view.projected):
        if row.role == "assistant" and row.persona_id == persona_id:
            for call in row.tool_calls:
                if call.name not in used:
                    used.append(call.name)
    return used
