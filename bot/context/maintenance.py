"""Runs context management: compaction, collapse and overflow recovery (docs/ARCHITECTURE.md §6).

`after_turn` runs as a job after a turn that leaves it work (`has_work`,
`bot.jobs`): when the context passes `collapse_share` of the budget it folds
the oldest ranges in the window, and
when it passes `compact_share` (or `compact_dropped_messages` messages have
left the window unsummarised) it updates the session's summary. Only overflow
recovery runs in the user's wait. Every result is a stored record; messages
are never rewritten. The job queue never runs two jobs of one session at once;
should work overlap anyway (a `/compact` meanwhile), the records' unique ranges
keep it from being stored twice.

Every summariser call starts with the conversation's last request and its reply
(`bot.context.prefix`), rebuilt once per job before anything is folded, and puts its
instruction last: the model's server serves the conversation from its cache and keeps it
there for the next turn. Overflow recovery, whose conversation no longer fits, and a call
whose prefix leaves too little room go without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from bot import metrics
from bot.config import ContextSettings, ModelSettings, Settings
from bot.context.prefix import AudienceOf, LastRequests
from bot.conversation_model import ConversationModel
from bot.errors import ContextOverflowError
from bot.providers.after_turn import PrefixOnce, SharedPrefix, after_turn_request
from bot.providers.base import SUMMARY_PURPOSE, ChatProvider
from bot.storage.boundary import boundary_for
from bot.storage.context_models import ContextRecord
from bot.storage.context_records import ContextRecords, ContextView
from bot.storage.messages import MessageStore
from bot.storage.models import ChatSession
from bot.turns.assembly import ContextAssembler
from bot.turns.locks import SessionLocks
from bot.turns.prefixes import PrefixWatch
from persona import Persona, PersonaRegistry
from transcript import (
    COLLAPSE_INSTRUCTIONS,
    CompactionPlan,
    Context,
    Message,
    Summarise,
    SummaryItem,
    SummaryRun,
    TranscriptRow,
    fit_summary,
    keep_recent_cut,
    max_chunk_tokens,
    plan_collapse,
    plan_compaction,
    summarise_in_stages,
    summarise_with_fallback,
    summary_items,
    truncate_to_tokens,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Background collapses per turn at most; the rest waits for the next turn.
MAX_COLLAPSES_PER_TURN = 3
# A collapse note is kept short, or folding would not free room.
MIN_COLLAPSE_TOKENS = 40
# A summary may use at most this share of the model's window ...
SUMMARY_WINDOW_SHARE = 8
# ... and the summariser's instructions take about this many tokens.
PROMPT_TOKENS = 300
MIN_CHUNK_ROOM = 256


@dataclass
class ContextCounters:
    """What context management did in this process (the benchmark reads these)."""

    compactions: int = 0
    collapses: int = 0
    overflow_recoveries: int = 0
    summary_calls: int = 0
    summary_failures: int = 0
    fallbacks: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class CompactionResult:
    record: ContextRecord
    plan: CompactionPlan
    folded_tokens: int  # tokens of the messages folded in


class ContextMaintainer:
    """Keeps each session's context within the model's window, given what it works with."""

    def __init__(
        self,
        *,
        settings: Settings,
        messages: MessageStore,
        assembler: ContextAssembler,
        personas: PersonaRegistry,
        provider: ChatProvider,
        audience_of: AudienceOf | None = None,
    ) -> None:
        self.settings: ContextSettings = settings.context
        self.model_settings: ModelSettings = settings.model
        self.messages = messages
        self.assembler = assembler
        self.records: ContextRecords = assembler.records
        self.db = boundary_for(messages.database)
        self.personas = personas
        self.provider = provider
        # The conversation's last request, which every summariser call starts with.
        self.last_requests = LastRequests(assembler, personas, audience_of)
        self.counters = ContextCounters()
        # What each conversation's turn requests did to the prompt prefix (`/context` shows it).
        self.prefixes = PrefixWatch()
        self._locks = SessionLocks()
        self._busy: set[str] = set()

    def persona_for(self, session: ChatSession) -> Persona:
        return self.personas.resolve(session.persona_id)

    def model_for(self, session: ChatSession) -> ConversationModel:
        """The conversation's model (its /model choice, else the persona's): summaries use it too."""
        return self.assembler.conversation_model(session, self.persona_for(session))

    # --- the engine's hooks ------------------------------------------------------

    async def after_turn(self, session: ChatSession) -> None:
        """Collapse and compact as needed; skipped while another job runs for the session."""
        if session.id in self._busy:
            return
        self._busy.add(session.id)
        try:
            async with self._locks.hold(session.id):
                await self._timed(self._maintain(session))
        finally:
            self._busy.discard(session.id)

    async def recover_from_overflow(self, session: ChatSession, context: Context) -> bool:
        """Fold the oldest range still in the window so the retried request is smaller.

        The conversation did not fit: the fold's request goes without its prefix.
        """
        async with self._locks.hold(session.id):
            view = await self.db.run(self.assembler.view, session.id)
            folded = await self._timed(
                self._collapse(session, view, context.stats.kept_seqs, None, keep_recent=1)
            )
        if folded:
            self.counters.overflow_recoveries += 1
            metrics.OVERFLOW_RECOVERIES.inc()
        return folded

    # --- commands ------------------------------------------------------------------

    async def compact_now(self, session: ChatSession, focus: str | None = None) -> CompactionResult | None:
        """`/compact`: summarise all but the most recent messages now."""
        async with self._locks.hold(session.id):
            view = await self.db.run(self.assembler.view, session.id)
            cut = keep_recent_cut(view.rows, self.settings.keep_recent_messages, view.snips)
            prefix = await self.last_requests.prefix(session)
            return await self._timed(self._compact(session, view, cut, focus, prefix))

    async def shared_prefix(self, session: ChatSession) -> SharedPrefix | None:
        """The conversation's last request and its reply, rebuilt now from the stored rows
        (what the memory offload's distillation starts with too)."""
        return await self.last_requests.prefix(session)

    # --- the work --------------------------------------------------------------

    async def _maintain(self, session: ChatSession) -> None:
        persona = self.persona_for(session)
        view, context = await self._build(session, persona)
        # Rebuilt before anything is folded (the request the server served last), when there
        # is work for it.
        prefix = PrefixOnce(lambda: self.last_requests.prefix(session))
        for _ in range(MAX_COLLAPSES_PER_TURN):
            if _share(context) < self.settings.collapse_share:
                break
            keep = self.settings.keep_recent_messages
            shared = await prefix.get()
            if not await self._collapse(session, view, context.stats.kept_seqs, shared, keep_recent=keep):
                break
            view, context = await self._build(session, persona)
        if _share(context) >= self.settings.compact_share:
            cut = keep_recent_cut(view.rows, self.settings.keep_recent_messages, view.snips)
        elif (
            context.stats.kept_seqs
            and await self._dropped_messages(session, view, context) >= self.settings.compact_dropped_messages
        ):
            # Only what left the window: the window itself stays verbatim.
            cut = min(context.stats.kept_seqs) - 1
        else:
            return
        await self._compact(session, view, cut, None, await prefix.get())

    async def _build(self, session: ChatSession, persona: Persona) -> tuple[ContextView, Context]:
        return await self.assembler.assemble_view(session, persona)

    async def _compact(
        self,
        session: ChatSession,
        view: ContextView,
        cut: int,
        focus: str | None,
        prefix: SharedPrefix | None,
    ) -> CompactionResult | None:
        window = await self._window(session)
        target = min(self.settings.summary_tokens, window // SUMMARY_WINDOW_SHARE)
        # A summariser call holds the instructions, the previous summary (at most
        # 2 × target), a chunk and the reply (target), after the prefix.
        if prefix is not None and not prefix.leaves(window, 3 * target + PROMPT_TOKENS):
            prefix = None
        room = window - (prefix.tokens if prefix is not None else 0)
        work = await self.db.run(self._plan_compaction, session.id, view, cut, room, target)
        if work is None:
            return None
        plan, items, chunk_tokens = work
        run = self._run(session, target, prefix)
        text = await summarise_in_stages(
            run,
            items,
            chunk_tokens=chunk_tokens,
            context_window=window,
            previous=view.summary_text,
            focus=focus,
        )
        self._count(run)
        record = await self.db.run(self._store_summary, session.id, plan, text, 2 * target, focus)
        if record is None:
            log.info("session %s: a newer summary was stored meanwhile; dropped this one", session.id)
            return None
        self.counters.compactions += 1
        metrics.COMPACTIONS.inc()
        return CompactionResult(record, plan, sum(item.tokens for item in items))

    def _plan_compaction(
        self, session_id: str, view: ContextView, cut: int, window: int, target: int
    ) -> tuple[CompactionPlan, list[SummaryItem], int] | None:
        """What to summarise up to `cut`, its lines with their token counts, and the chunk size.

        `window`: what a summariser call may hold after its prefix.

        Token counting is CPU work: run on the database thread with the read, as a
        turn's context build is.
        """
        previous = view.summary_last_seq
        if cut <= previous:
            return None
        rows = self.messages.rows_between(session_id, previous + 1, cut)
        plan = plan_compaction(
            rows, previous_last_seq=previous, cut_seq=cut, collapses=view.collapses, snips=view.snips
        )
        if plan is None:
            return None
        items = summary_items(plan.rows)
        # A summariser call holds the instructions, the previous summary (at most
        # 2 × target), a chunk and the reply (target): the chunk gets the rest.
        room = max(window - 3 * target - PROMPT_TOKENS, MIN_CHUNK_ROOM)
        return plan, items, max_chunk_tokens(items, room)

    def _store_summary(
        self, session_id: str, plan: CompactionPlan, text: str, max_tokens: int, focus: str | None
    ) -> ContextRecord | None:
        return self.records.add_summary(
            session_id, plan.first_seq, plan.last_seq, fit_summary(text, max_tokens), focus
        )

    async def _collapse(
        self,
        session: ChatSession,
        view: ContextView,
        candidates: Sequence[int],
        prefix: SharedPrefix | None,
        *,
        keep_recent: int,
    ) -> bool:
        """Fold the oldest eligible range; True when a range is folded (by us or a peer)."""
        window = await self._window(session)
        # The note's limit is at most a quarter of the summary's.
        if prefix is not None and not prefix.leaves(
            window, self.settings.summary_tokens // 4 + PROMPT_TOKENS
        ):
            prefix = None
        room = window - (prefix.tokens if prefix is not None else 0)
        work = await self.db.run(self._plan_collapse, view, candidates, keep_recent, room)
        if work is None:
            return False
        rows, items, chunk_tokens, limit = work
        run = self._run(session, limit, prefix)
        text = await summarise_with_fallback(
            run,
            items,
            chunk_tokens=chunk_tokens,
            context_window=window,
            instructions=COLLAPSE_INSTRUCTIONS,
        )
        self._count(run)
        record = await self.db.run(self._store_collapse, session.id, rows, text, limit)
        if record is not None:
            self.counters.collapses += 1
            metrics.COLLAPSES.inc()
        return True

    def _plan_collapse(
        self, view: ContextView, candidates: Sequence[int], keep_recent: int, window: int
    ) -> tuple[tuple[TranscriptRow, ...], list[SummaryItem], int, int] | None:
        """The oldest range to fold, its lines, the chunk size and the note's token limit.

        CPU work (planning, token counting): run on the database thread, as a turn's
        context build is.
        """
        rows = plan_collapse(
            view.rows,
            candidates=candidates,
            collapses=view.collapses,
            snips=view.snips,
            max_messages=max(self.settings.collapse_range_messages, 1),
            keep_recent=keep_recent,
        )
        if not rows:
            return None
        items = summary_items(rows)
        folded_tokens = sum(item.tokens for item in items)
        limit = max(MIN_COLLAPSE_TOKENS, min(self.settings.summary_tokens // 4, folded_tokens // 2))
        return rows, items, max_chunk_tokens(items, window), limit

    def _store_collapse(
        self, session_id: str, rows: Sequence[TranscriptRow], text: str, limit: int
    ) -> ContextRecord | None:
        return self.records.add_collapse(
            session_id, rows[0].seq, rows[-1].seq, truncate_to_tokens(text, limit)
        )

    # --- helpers -----------------------------------------------------------------

    async def _dropped_messages(self, session: ChatSession, view: ContextView, context: Context) -> int:
        return await self.db.run(self.dropped_messages, session.id, view, context)

    def dropped_messages(self, session_id: str, view: ContextView, context: Context) -> int:
        """Conversation messages after the summary that are older than the window (not snipped)."""
        if min(context.stats.kept_seqs) <= view.summary_last_seq + 1:
            return 0  # the window starts right after the summary: no message lies between
        return self.messages.count_conversation(
            session_id,
            view.summary_last_seq,
            min(context.stats.kept_seqs),
            skip=[(snip.first_seq, snip.last_seq) for snip in view.snips],
        )

    def has_work(
        self, session_id: str, view: ContextView, context: Context, recall_allowance: int = 0
    ) -> bool:
        """Whether `after_turn` would fold or summarise anything, given the view and context
        it would build: what a turn checks, so that the job is enqueued only when it has
        work. Reads the database (one count at most): call it off the event loop.

        `recall_allowance`: tokens of recalled lines the job's own context may hold that
        `context` does not. Unless even with them every row still fits and the share
        stays under both thresholds, the job's context could differ: it has work to judge.
        """
        if recall_allowance and not self._roomy(context, recall_allowance):
            return True
        share = _share(context)
        if share >= self.settings.collapse_share or share >= self.settings.compact_share:
            return True
        if not context.stats.kept_seqs:
            return False
        enough = self.settings.compact_dropped_messages
        # Each message has a seq of its own: fewer seqs between the summary and the window
        # than `enough` mean fewer messages (the usual case, with no count to read).
        if min(context.stats.kept_seqs) - view.summary_last_seq - 1 < enough:
            return False
        return self.dropped_messages(session_id, view, context) >= enough

    def _roomy(self, context: Context, extra_tokens: int) -> bool:
        """Whether `context`, `extra_tokens` larger, would keep the same rows and stay under both shares."""
        if context.stats.dropped_for_budget or context.stats.newest_truncated:
            return False
        budget = context.stats.budget_tokens
        if not budget:
            return True
        share = (context.stats.total_tokens + extra_tokens) / budget
        return share < min(self.settings.collapse_share, self.settings.compact_share)

    async def _window(self, session: ChatSession) -> int:
        """The conversation's model's window in Chorus's tokens, less the margin, as known now."""
        info = await self.assembler.windows.refresh(self.model_for(session).model)
        return info.fitted_window

    def _run(self, session: ChatSession, target_tokens: int, prefix: SharedPrefix | None) -> SummaryRun:
        return SummaryRun(
            summarise=self._summariser(session, target_tokens, prefix),
            attempts=self.settings.summary_attempts,
            max_calls=self.settings.summary_max_calls,
            target_tokens=target_tokens,
            prefix=prefix.messages if prefix is not None else (),
        )

    def _summariser(self, session: ChatSession, target_tokens: int, prefix: SharedPrefix | None) -> Summarise:
        model = self.model_for(session).model

        async def summarise(messages: list[Message]) -> str:
            # No persona on the request: the instruction, last, asks for a neutral summary.
            request = after_turn_request(
                messages, prefix, model=model, max_tokens=target_tokens, purpose=SUMMARY_PURPOSE
            )
            try:
                return await self.provider.complete(request)
            except ContextOverflowError:
                if prefix is None:
                    raise
                # The prefix and the instruction together did not fit after all: the instruction alone.
                alone = after_turn_request(
                    messages[-1:], None, model=model, max_tokens=target_tokens, purpose=SUMMARY_PURPOSE
                )
                return await self.provider.complete(alone)

        return summarise

    def _count(self, run: SummaryRun) -> None:
        self.counters.summary_calls += run.calls
        self.counters.summary_failures += run.failures
        self.counters.fallbacks.extend(run.fallbacks)
        if run.fallbacks:
            log.warning(
                "summariser fell back (%s) after %d failed calls", ", ".join(run.fallbacks), run.failures
            )

    async def _timed(self, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await work
        finally:
            self.counters.seconds += time.perf_counter() - started


def _share(context: Context) -> float:
    budget = context.stats.budget_tokens
    return context.stats.total_tokens / budget if budget else 0.0
