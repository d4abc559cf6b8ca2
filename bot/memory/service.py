"""MemoryService: the offloader, its idle flush and recall, as the engine and the jobs use them.

A turn whose reply reaches an offload trigger enqueues a `memory.offload` job
(`offload_has_work`), and every reply (re)sets a `memory.idle_flush` timer job.
The end of a session's activity is `idle_seconds` without a turn (which also
covers `/new`: the old session simply goes idle) or the process that ran its
jobs shutting down (`aclose`); then anything pending is offloaded. Both are
durable jobs (`bot.jobs`): a crash loses neither.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from bot.config import MemorySettings
from bot.errors import ProviderError, error_line
from bot.memory.backfill import Backfill, BackfillResult
from bot.memory.dense import DenseIndex, Embedder, embedded_text, off_loop
from bot.memory.distill import Distiller, ModelDistiller, ModelFor, RuleDistiller
from bot.memory.offload import Offloader, OffloadResult
from bot.memory.recall import Recall, TurnMemory, turn_query, window_start
from bot.memory.remembering import Remembered, remember
from bot.metrics import MEMORY_OFFLOADS
from bot.providers.after_turn import PrefixOnce
from bot.providers.base import ChatProvider
from bot.storage.boundary import boundary_for
from bot.storage.memory_store import MemoryStore
from bot.storage.models import ChatSession, utcnow
from bot.storage.owners import Owner
from bot.windows import ModelWindows
from transcript import TranscriptRow

log = logging.getLogger(__name__)


# Sessions flushed at once at shutdown.
SHUTDOWN_FLUSH_PARALLEL = 4
# Turn queries waiting for their embedding at most (one per turn being assembled).
QUERY_TEXTS = 256
# Sessions whose newest turn memory is kept for the context maintenance that follows.
TURN_MEMORIES = 1024


def choose_distiller(
    provider: ChatProvider, model: str, windows: ModelWindows, model_for: ModelFor | None = None
) -> Distiller:
    """The model distils when a real one is configured (the conversation's, given `model_for`,
    fitted to its window); the offline rules otherwise."""
    if provider.name == "demo":
        return RuleDistiller()
    return ModelDistiller(provider, model, windows, model_for)


def count_offload(result: OffloadResult | None) -> OffloadResult | None:
    if result is not None:
        MEMORY_OFFLOADS.inc()
    return result


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        distiller: Distiller,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.embedder = embedder
        self.offloader = Offloader(store, distiller, settings, embedder)
        self.recall = Recall(store, settings, DenseIndex(store, embedder) if embedder is not None else None)
        # Sessions with a turn (or an offload) in this process that did not go idle since:
        # the flush at shutdown offloads what they left pending (with the idle flush off,
        # so is this). Turns note theirs on a database thread, hence the lock.
        self._active: dict[str, ChatSession] = {}
        self._active_lock = threading.Lock()
        # The memory each session's newest context was built with, and what it was built for.
        self._turn_memory: dict[
            str, tuple[tuple[str, int | None, tuple[int, int]], TurnMemory, datetime | None]
        ] = {}
        # What a turn's query is embedded as (its message as the offload embeds it), by query.
        self._query_texts: dict[str, str] = {}
        self._backfill: asyncio.Task[BackfillResult | None] | None = None
        self._stop_backfill = False

    def start_backfill(self) -> asyncio.Task[BackfillResult | None] | None:
        """Embed the rows stored before dense recall was on, in the background.

        Started by `chorus serve`; a no-op without dense recall. Each batch is read and
        written on the database thread and embedded on the embedding thread (one job
        there), so turns' queries are embedded between batches.
        Shutdown stops it between batches; the next start carries on where it stopped.
        """
        if self.embedder is None or not self.settings.enabled or self._backfill is not None:
            return self._backfill
        self._backfill = asyncio.create_task(self._run_backfill(self.embedder), name="memory-backfill")
        return self._backfill

    async def _run_backfill(self, embedder: Embedder) -> BackfillResult | None:
        backfill = Backfill(self.store, embedder)
        # Reads and writes on the database's thread (SQLite's one writer), embedding on its own.
        db = boundary_for(self.store.database)
        total = BackfillResult(0, 0)
        try:
            while not self._stop_backfill and (found := await db.run(backfill.next_batch)) is not None:
                vectors = await off_loop(backfill.embed, found)
                total += await db.run(backfill.write, found, vectors)
        except Exception:
            log.exception("embedding stored memory for dense recall failed")
            return None
        if total.items or total.messages:
            log.info("dense recall: embedded %d stored items and %d messages", total.items, total.messages)
        return total

    async def offload_due(self, session: ChatSession, prefix: PrefixOnce | None = None) -> None:
        """The `memory.offload` job: offload when a trigger is reached.

        `prefix`: the conversation's last request, which the distillation starts with.
        """
        if not self.settings.enabled:
            return
        # Noted even when the offload fails: the shutdown flush retries it.
        self._note_active(session)
        count_offload(await self.offloader.offload(session, prefix=prefix))

    def offload_has_work(self, session: ChatSession, newest: Sequence[TranscriptRow]) -> bool:
        """Whether a turn that leaves `newest` as the session's newest rows should enqueue
        the `memory.offload` job (see `Offloader.due_after`). Reads the database."""
        if not self.settings.enabled:
            return False
        self._note_active(session)
        return self.offloader.due_after(session.id, newest)

    def _note_active(self, session: ChatSession) -> None:
        if self.settings.idle_seconds > 0:
            with self._active_lock:
                self._active[session.id] = session

    async def flush_idle(self, session: ChatSession, prefix: PrefixOnce | None = None) -> None:
        """The `memory.idle_flush` job: the session went quiet, offload all that is pending."""
        if not self.settings.enabled:
            return
        with self._active_lock:
            self._active.pop(session.id, None)
        await self.flush(session, prefix=prefix)

    def for_turn(
        self,
        session: ChatSession,
        rows: Sequence[TranscriptRow],
        token_budget: int | None = None,
        steady_before: datetime | None = None,
    ) -> TurnMemory:
        """The snapshot and recalled lines for a context built from `rows`.

        The after-turn context maintenance builds the turn's context again a moment
        later, for the same newest message: it gets the turn's memory back rather than
        searching again, unless memory changed since (an offload stored items or
        vectors). The window then holds the reply too, so at most one message more
        could have been recalled; what the model saw is what maintenance measures.
        """
        if not self.settings.enabled:
            return TurnMemory("", ())
        owner = Owner.of(session)
        key = (turn_query(rows), token_budget, self.store.vector_generation(owner))
        found = self._turn_memory.get(session.id)
        if found is not None and found[0] == key:
            memory, split_at = found[1], found[2]
            if split_at == steady_before:
                return memory
            # The reply that times the window's step was stored since: only the snapshot's
            # split moves, what was recalled stands.
            return replace(self.recall.snapshot_only(session, steady_before), recall=memory.recall)
        memory = self.recall.for_turn(session, rows, token_budget, steady_before)
        self._turn_memory.pop(session.id, None)
        if len(self._turn_memory) >= TURN_MEMORIES:
            self._turn_memory.pop(next(iter(self._turn_memory)))
        self._turn_memory[session.id] = (key, memory, steady_before)
        return memory

    def without_recall(self, session: ChatSession, steady_before: datetime | None = None) -> TurnMemory:
        """The snapshot of the newest items, and no recalled lines (nothing is searched)."""
        if not self.settings.enabled:
            return TurnMemory("", ())
        return self.recall.snapshot_only(session, steady_before)

    def recall_allowance(self, token_budget: int) -> int:
        """Tokens a turn's recalled lines may take at most, twice over for their heading and marks.

        Recalled lines stop at `recall_budget_share` of the budget (see `Recall.for_turn`).
        """
        if not self.settings.enabled or self.settings.recall_items <= 0:
            return 0
        return 2 * int(token_budget * self.settings.recall_budget_share)

    def query_to_embed(self, session: ChatSession, rows: Sequence[TranscriptRow]) -> str | None:
        """The turn's query, when `for_turn` will search its embedding and it is not embedded yet.

        None when dense recall is off, the query is embedded already, or the owner has
        nothing a dense search could return (no embedded item, no embedded message
        outside this window): then the turn does not embed at all. Reads the database:
        call it where `for_turn` runs.
        """
        dense = self.recall.dense
        if dense is None or not self.settings.enabled or self.settings.recall_items <= 0:
            return None
        query = turn_query(rows)
        if not query or dense.has_query_vector(query):
            return None
        if not dense.searchable(Owner.of(session), session.id, window_start(rows)):
            return None
        sender = next((row.sender_name for row in reversed(rows) if row.role == "user"), None)
        if len(self._query_texts) >= QUERY_TEXTS:
            self._query_texts.pop(next(iter(self._query_texts)))
        self._query_texts[query] = embedded_text(sender, query)
        return query

    def embed_query_ahead(self, query: str) -> None:
        """Start embedding a query from `query_to_embed` on its own thread (CPU work, off
        the loop), while the turn's build reads and searches full text on a database
        thread; its dense search waits for the vector.

        The query is embedded as its message is (with its speaker), so the offload that
        embeds the message reuses this vector instead of running the model again.
        """
        dense = self.recall.dense
        if dense is not None:
            dense.embed_ahead(query, self._query_texts.pop(query, query))

    async def remember(self, session: ChatSession, text: str, seq: int | None) -> Remembered:
        """Keep `text` (one item a line) in the owner's memory now, as a `<memory>` tag would."""
        return await remember(self.store, self.embedder, session, text, seq=seq, said_at=utcnow())

    async def flush(
        self, session: ChatSession, *, embed: bool = True, prefix: PrefixOnce | None = None
    ) -> OffloadResult | None:
        """Offload everything pending for the session, whatever the triggers say."""
        return count_offload(await self.offloader.offload(session, force=True, embed=embed, prefix=prefix))

    async def aclose(self) -> None:
        """Shutdown ends the activity of every session offloaded here: flush what is pending."""
        if self._backfill is not None:
            self._stop_backfill = True
            await asyncio.gather(self._backfill, return_exceptions=True)
        with self._active_lock:
            active, self._active = list(self._active.values()), {}
        if not active:
            return
        # A few at a time: each may be a model call, and the process has a deadline to stop.
        slots = asyncio.Semaphore(SHUTDOWN_FLUSH_PARALLEL)
        flushing = [asyncio.create_task(self._flush_at_shutdown(session, slots)) for session in active]
        done, left = await asyncio.wait(flushing, timeout=self.settings.shutdown_flush_seconds)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        if left:
            log.warning(
                "memory flush at shutdown: %d of %d sessions flushed in %.0f s; "
                "the rest are flushed by their idle timer after the next start",
                len(done),
                len(active),
                self.settings.shutdown_flush_seconds,
            )

    async def _flush_at_shutdown(self, session: ChatSession, slots: asyncio.Semaphore) -> None:
        async with slots:
            try:
                # Distilled and stored now, embedded by the backfill at the next start: the
                # encoder is the slow part (one thread, tens of ms a message), and a fast chat
                # leaves more behind than the deadline would let it embed.
                await self.flush(session, embed=False)
            except ProviderError as error:
                # The model is down or refusing: an operator's condition, not a defect, and a
                # traceback per session would bury it. Nothing is lost: the cursor moves only
                # with stored items, so the session's next offload takes these messages up.
                log.warning(
                    "memory of session %s not flushed at shutdown: %s; its offload cursor stays, "
                    "and its next offload (a turn, or its idle timer after the next start) takes it up",
                    session.id,
                    error_line(error),
                )
            except Exception as error:
                log.error(
                    "memory of session %s not flushed at shutdown: %s: %s; its offload cursor stays",
                    session.id,
                    type(error).__name__,
                    error_line(error),
                )
                log.debug("the memory flush of session %s at shutdown", session.id, exc_info=error)
