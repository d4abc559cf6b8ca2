"""Which of a conversation's turn requests broke the prompt prefix the server could reuse, and why.

Each model call of a turn is printed (`transcript.prefix`) and compared with the
conversation's previous call in this process. A break is logged with the part that changed
first and counted by its reason: a persona switch, a `/model` change, a snip, a compaction
or collapse, the window stepping forward, a changed tool list are expected; anything else is
`unexpected`. The prints live in memory: after a restart the first call compares with nothing
and the prefix is unknown until the next.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from bot.metrics import PROMPT_PREFIX_BREAKS
from bot.providers.base import ChatRequest
from bot.storage.context_records import ContextView
from transcript.prefix import PrefixChange, PrefixHistory, PromptPrint, first_change, prompt_print

log = logging.getLogger(__name__)

# At most this many conversations are remembered; the oldest goes first (its prefix: unknown).
REMEMBERED_CONVERSATIONS = 10_000


@dataclass(frozen=True)
class RequestShape:
    """What a request was built from, beyond its text: enough to name why its prefix broke."""

    model: str
    persona_id: str
    summary_last_seq: int = 0
    collapses: tuple[tuple[int, int], ...] = ()
    snips: tuple[tuple[int, int], ...] = ()
    window_from_seq: int | None = None

    @classmethod
    def of(cls, request: ChatRequest, view: ContextView | None, window_from_seq: int | None) -> RequestShape:
        return cls(
            model=request.model,
            persona_id=request.persona_id or "",
            summary_last_seq=view.summary_last_seq if view is not None else 0,
            collapses=tuple((c.first_seq, c.last_seq) for c in view.collapses) if view is not None else (),
            snips=tuple((s.first_seq, s.last_seq) for s in view.snips) if view is not None else (),
            window_from_seq=window_from_seq,
        )


def break_reason(previous: RequestShape, current: RequestShape, change: PrefixChange) -> str:
    """Why `change` happened, from what changed between the two requests' shapes."""
    if previous.model != current.model:
        return "model"
    if previous.persona_id != current.persona_id:
        return "persona"
    if previous.snips != current.snips:
        return "snip"
    if previous.summary_last_seq != current.summary_last_seq:
        return "compact"
    if previous.collapses != current.collapses:
        return "collapse"
    if change.part == "tools":
        return "tools"
    if change.part == "message" and previous.window_from_seq != current.window_from_seq:
        return "window"
    return "unexpected"


@dataclass
class _Conversation:
    print: PromptPrint
    shape: RequestShape
    compared: int = 0
    breaks: Counter[str] = field(default_factory=Counter)
    last_change: PrefixChange | None = None
    last_reason: str | None = None
    newest_broke: bool = False


class PrefixWatch:
    """The previous request's print per conversation, and the breaks seen since the start."""

    def __init__(self) -> None:
        self._conversations: dict[str, _Conversation] = {}

    def observe(self, session_id: str, request: ChatRequest, shape: RequestShape) -> str | None:
        """Compares `request` with the conversation's previous one; the break's reason, or None."""
        current = prompt_print(request.messages, request.tools, request.model)
        seen = self._conversations.pop(session_id, None)
        if seen is None:
            self._remember(session_id, _Conversation(current, shape))
            return None
        change = first_change(seen.print, current)
        reason = break_reason(seen.shape, shape, change) if change is not None else None
        seen.compared += 1
        seen.newest_broke = change is not None
        if change is not None and reason is not None:
            seen.breaks[reason] += 1
            seen.last_change, seen.last_reason = change, reason
            PROMPT_PREFIX_BREAKS.labels(reason).inc()
            log.info(
                "Session %s: the request's prompt prefix broke at %s (%s).",
                session_id,
                change.describe(),
                reason,
            )
        seen.print, seen.shape = current, shape
        self._remember(session_id, seen)
        return reason

    def history(self, session_id: str) -> PrefixHistory | None:
        """What the conversation's requests since the start did to the prefix; None: none seen."""
        seen = self._conversations.get(session_id)
        if seen is None:
            return None
        return PrefixHistory(
            compared=seen.compared,
            breaks=dict(seen.breaks),
            last_change=seen.last_change,
            last_reason=seen.last_reason,
            newest_broke=seen.newest_broke,
        )

    def _remember(self, session_id: str, conversation: _Conversation) -> None:
        self._conversations[session_id] = conversation
        if len(self._conversations) > REMEMBERED_CONVERSATIONS:
            del self._conversations[next(iter(self._conversations))]
