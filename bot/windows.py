"""Each model's context window and how its tokenizer counts: asked, learned, calibrated, kept.

The window a request is fitted to comes, first found first:

1. configured — the model's `models:` entry or `model.context_windows[model]`, else
   `model.context_window` when set;
2. learned — the smallest window an overflow error named (stored; it survives a restart and
   holds for every process on the same database). A server that later states another
   window than it did when the lesson was learned was restarted: the lesson is dropped;
3. stated — what the server says when asked (`ChatProvider.discover_window`, once per
   model per process, its answer stored);
4. `DEFAULT_WINDOW`.

Chorus counts with tiktoken; the model's own tokenizer often counts 20-30% more or less.
The ratio of the server's `usage.prompt_tokens` to Chorus's count of the same request
calibrates every later budget (it rises at once, and falls slowly, so one short answer
cannot talk it down), and a margin covers what neither can count (the chat template).

Lessons belong to the model that answered or refused; while a fallback answers for a model,
that model's requests are fitted to the smaller of the two windows.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from bot import metrics
from bot.config import Settings
from bot.errors import OverflowNumbers
from bot.storage.boundary import boundary_for
from bot.storage.model_profiles import ModelProfileStore, StoredProfile

log = logging.getLogger(__name__)

# The window assumed for a model nothing is known about yet.
DEFAULT_WINDOW = 128_000
# A calibration ratio outside these bounds is a broken count, not a tokenizer.
RATIO_BOUNDS = (0.5, 4.0)
# How far one sample that counts fewer tokens moves the ratio down.
RATIO_DECAY = 0.2
# The first samples are all stored; later ones only when the ratio moved this much.
SAVED_SAMPLES = 10
RATIO_SAVE_STEP = 0.01
# An overflow whose error names no window: what is known of the window shrinks by this.
NARROWING = 0.75
# Until the first answer calibrates the count, the margin is this many times the setting.
UNCALIBRATED_MARGIN_FACTOR = 3
# The reply never takes more than this share of a small window.
REPLY_SHARE = 4

Discover = Callable[[str], Awaitable[int | None]]


@dataclass(frozen=True)
class WindowInfo:
    """One model's window as a request is fitted to it now."""

    model: str
    # In the server's tokens, prompt and reply together.
    window: int
    # Where the window comes from: "configured", "learned", "stated by the server" or "default".
    source: str
    # The server's tokens per token Chorus counts (1.0 until an answer says otherwise).
    ratio: float
    samples: int
    margin: float
    # The server's tokens kept for the reply; sent as the request's max_tokens.
    reply_reserve: int

    @property
    def calibrated(self) -> bool:
        return self.samples > 0

    @property
    def budget_tokens(self) -> int:
        """The prompt's room in Chorus's tokens: the window less margin and reply, calibrated."""
        room = self.window * (1 - self.margin) - self.reply_reserve
        return max(math.floor(room / self.ratio), 1)

    @property
    def counted_window(self) -> int:
        """The window in Chorus's tokens (the shares compaction and collapse start at apply to it)."""
        return max(math.floor(self.window / self.ratio), 1)

    @property
    def fitted_window(self) -> int:
        """The window in Chorus's tokens less the margin: what a whole call, reply included, fits."""
        return max(math.floor(self.window * (1 - self.margin) / self.ratio), 1)

    def describe(self) -> str:
        """One line for /context and /status."""
        count = (
            f"counts calibrated ×{self.ratio:.2f} from {self.samples:,} answers"
            if self.calibrated
            else "counts not calibrated yet"
        )
        return (
            f"{self.window:,} tokens ({self.source}); {self.reply_reserve:,} kept for the reply, "
            f"{self.margin:.0%} margin; {count}"
        )


@dataclass
class _Known:
    stored: StoredProfile
    asked: bool = False


class ModelWindows:
    """The windows of the models this process talks to, refreshed before each model call."""

    def __init__(self, settings: Settings, store: ModelProfileStore, discover: Discover) -> None:
        # Read on every call: the windows written down (`Settings.configured_windows`), the margin.
        self.settings = settings
        self.store = store
        self.db = boundary_for(store.database)
        self._discover = discover
        self._known: dict[str, _Known] = {}
        self._asking: dict[str, asyncio.Lock] = {}
        # A fallback model answering for a model (this process saw it answer or refuse last).
        self._stand_ins: dict[str, str] = {}

    def info(self, model: str) -> WindowInfo:
        """The window `model`'s next request is fitted to, from what is known now (no I/O).

        While a fallback answers for the model, the request fits the smaller of the two.
        """
        own = self._own_info(model)
        stand_in = self._stand_ins.get(model)
        if stand_in is None:
            return own
        theirs = self._own_info(stand_in)
        if theirs.budget_tokens >= own.budget_tokens:
            return own
        return replace(theirs, model=model, source=f"{theirs.source}, {stand_in} answering for {model}")

    def answered_by(self, model: str, answering: str) -> None:
        """`answering` answered or refused a request for `model`: a fallback stands in for it
        until the model itself answers again."""
        if answering == model:
            self._stand_ins.pop(model, None)
        else:
            self._stand_ins[model] = answering

    def _own_info(self, model: str) -> WindowInfo:
        known = self._known.get(model)
        stored = known.stored if known is not None else StoredProfile()
        window, source = self._window(model, stored)
        calibrated = stored.samples > 0 and stored.ratio is not None
        margin = self.settings.model.token_margin * (1 if calibrated else UNCALIBRATED_MARGIN_FACTOR)
        return WindowInfo(
            model=model,
            window=window,
            source=source,
            ratio=stored.ratio if calibrated and stored.ratio is not None else 1.0,
            samples=stored.samples if calibrated else 0,
            margin=min(margin, 0.5),
            reply_reserve=min(self.settings.model.reply_reserve_tokens, window // REPLY_SHARE),
        )

    async def refresh(self, model: str) -> WindowInfo:
        """Reads what every process learned of `model` (and of a fallback answering for it),
        asking each server once per process."""
        stand_in = self._stand_ins.get(model)
        if stand_in is not None:
            await self._refresh_one(stand_in)
        await self._refresh_one(model)
        return self.info(model)

    async def _refresh_one(self, model: str) -> None:
        stored = await self.db.run(self.store.read, model)
        known = self._known.setdefault(model, _Known(stored))
        known.stored = stored
        if not known.asked and self._configured(model) is None:
            await self._ask_server(model, known)

    async def learn_overflow(self, model: str, numbers: OverflowNumbers, counted: int | None) -> bool:
        """Learns from an overflow of a request Chorus counted `counted`; True if the budget shrank.

        The window the error names is stored (never raised: the smaller lesson wins); the
        request's size in the server's tokens calibrates the count. An error with no
        numbers narrows what is known by `NARROWING`, so a retry is smaller.
        """
        await self._refresh_one(model)
        before = self._own_info(model)
        if numbers.requested is not None and counted:
            await self.observe(model, counted, numbers.requested, rising_only=True)
        window = numbers.window
        kind = "overflow"
        if window is None or (window >= before.window and numbers.requested is None):
            # Only a request near the window says the window is smaller than thought; a
            # small one rejected without numbers (a proxy's body limit) teaches nothing.
            estimate = (counted or 0) * before.ratio + before.reply_reserve
            if estimate < before.window * NARROWING:
                return False
            window = max(math.floor(before.window * NARROWING), 1)
            kind = "narrowed"
        if self._configured(model) is None and window < before.window:
            known = self._known[model]
            stored_window = await self.db.run(
                self.store.learn_window, model, window, known.stored.stated_window
            )
            known.stored = replace(
                known.stored, learned_window=stored_window, learned_under=known.stored.stated_window
            )
            metrics.MODEL_WINDOW_LESSONS.labels(kind).inc()
            log.warning(
                "The model %s overflowed at a window of %s tokens; it is fitted to %s from now on (%s).",
                model,
                f"{before.window:,}",
                f"{stored_window:,}",
                "the server said so" if kind == "overflow" else "the error named no window",
            )
        return self._own_info(model).budget_tokens < before.budget_tokens

    async def observe(self, model: str, counted: int, served: int, *, rising_only: bool = False) -> None:
        """One answer's prompt: Chorus counted `counted`, the server `served` (its usage)."""
        if counted <= 0 or served <= 0:
            return
        known = self._known.get(model)
        if known is None:
            known = self._known[model] = _Known(await self.db.run(self.store.read, model))
        stored = known.stored
        sample = served / counted
        if not RATIO_BOUNDS[0] <= sample <= RATIO_BOUNDS[1]:
            log.info(
                "Ignored a token count of %s for %s: %s served for %s counted.",
                sample,
                model,
                served,
                counted,
            )
            return
        if stored.ratio is None or stored.samples == 0 or sample >= stored.ratio:
            ratio = sample if stored.ratio is None or stored.samples == 0 else max(sample, stored.ratio)
        elif rising_only:
            return
        else:
            ratio = stored.ratio + (sample - stored.ratio) * RATIO_DECAY
        updated = replace(stored, ratio=ratio, samples=stored.samples + 1)
        known.stored = updated
        moved = stored.ratio is None or abs(ratio - stored.ratio) / stored.ratio >= RATIO_SAVE_STEP
        if updated.samples <= SAVED_SAMPLES or moved:
            await self.db.run(self.store.save_ratio, model, ratio, updated.samples)

    def _window(self, model: str, stored: StoredProfile) -> tuple[int, str]:
        configured = self._configured(model)
        if configured is not None:
            return configured, "configured"
        learned = stored.learned_window
        stale = learned is not None and stored.learned_under != stored.stated_window
        if (
            learned is not None
            and not stale
            and (stored.stated_window is None or learned < stored.stated_window)
        ):
            return learned, "learned"
        if stored.stated_window is not None:
            return stored.stated_window, "stated by the server"
        return DEFAULT_WINDOW, "default"

    def _configured(self, model: str) -> int | None:
        return self.settings.configured_windows().get(model, self.settings.model.context_window)

    async def _ask_server(self, model: str, known: _Known) -> None:
        async with self._asking.setdefault(model, asyncio.Lock()):
            if known.asked:
                return
            try:
                stated = await self._discover(model)
            except Exception as error:  # a server that answers oddly is a server that said nothing
                log.info("Could not ask the model server for %s's window: %s", model, error)
                stated = None
            known.asked = True
            if stated is None or stated == known.stored.stated_window:
                return
            log.info("The model server states a window of %s tokens for %s.", f"{stated:,}", model)
            metrics.MODEL_WINDOW_LESSONS.labels("stated").inc()
            await self.db.run(self.store.save_stated, model, stated)
            known.stored = await self.db.run(self.store.read, model)
