"""Which after-turn jobs a turn's reply asks for: those that have work once it is stored.

Each job (`bot.jobs.definitions`) may say when it has work: context maintenance when
the context nears its budget or enough messages left the window unsummarised, the
memory offload when one of its triggers is reached. A turn checks that against the
state its reply leaves — the view with the reply as its newest row, and the context
the next turn would start from — and its reply enqueues only those jobs, in the
reply's own transaction. Most turns then enqueue none of them: a job that would only
find nothing to do costs its claim, its reads and a context build. A recorded group
message is checked the same way against the state it leaves, with a context that
recalls nothing (it will not be answered): where recall could change what maintenance
finds, maintenance is asked for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.providers.base import PURPOSE_KEY, ChatRequest, ToolSchema
from bot.storage.context_records import ContextView
from bot.storage.jobs import JobSpec
from bot.storage.models import ChatSession
from transcript import Context, Message
from transcript.after_turn import ConversationPrefix

# An after-turn request keeps at least this many tokens for its own instruction and
# reply beside the conversation's prefix; with less it goes without the prefix.
MIN_INSTRUCTION_ROOM = 256


@dataclass(frozen=True)
class AfterTurn:
    """A session as a turn's reply, or a recorded message, leaves it."""

    session: ChatSession
    # The rows after the summary, oldest first, the reply (or recorded message) last: not
    # stored yet, so its seq is the lowest it can get.
    view: ContextView
    # The context built from `view`, as the next turn would start from it.
    context: Context
    # Tokens recall may add to that context that `context` leaves out: a recorded group
    # message's check searches nothing (see `TurnEngine.record`). 0: `context` holds them.
    recall_allowance: int = 0


class AfterTurnWork(Protocol):
    """What the engine asks of the after-turn jobs (`bot.jobs.JobDefinitions` answers)."""

    @property
    def after_turn(self) -> tuple[JobSpec, ...]:
        """Every job a stored turn may ask for (what a reply enqueues when its state is unknown)."""
        ...

    def with_work(self, turn: AfterTurn) -> tuple[JobSpec, ...]:
        """The jobs with work in `turn`'s state. Reads the database: call it off the event loop."""
        ...


@dataclass(frozen=True)
class SharedPrefix:
    """The conversation's last model request and its reply, with the tool schemas it offered.

    Rebuilt from stored rows by `bot.context.prefix.LastRequests`: an after-turn request
    (a summary, a collapse note, a memory distillation) starts with `messages` and carries
    `schemas`, so the server serves the prefix from its cache (`transcript.after_turn`).
    """

    conversation: ConversationPrefix
    schemas: tuple[ToolSchema, ...]

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.conversation.messages

    @property
    def tokens(self) -> int:
        return self.conversation.tokens

    def leaves(self, window: int, needed: int) -> bool:
        """Whether `window` holds the prefix and `needed` tokens more (the instruction and reply)."""
        return window - self.tokens - needed >= MIN_INSTRUCTION_ROOM


def after_turn_request(
    messages: Sequence[Message],
    prefix: SharedPrefix | None,
    *,
    model: str,
    max_tokens: int | None,
    purpose: str,
    temperature: float | None = None,
) -> ChatRequest:
    """An after-turn call: `messages` (the prefix's, then the instruction) with the prefix's
    tool schemas, which the model sees but may not call (`tool_choice` "none"): it answers
    in text, and the tools the server rendered into the prompt stay as they were."""
    tools = prefix.schemas if prefix is not None else ()
    return ChatRequest(
        messages=list(messages),
        model=model,
        temperature=temperature,
        max_tokens=max_tokens,
        tools=tools,
        tool_choice="none" if tools else None,
        extra={PURPOSE_KEY: purpose},
    )


class PrefixOnce:
    """A session's `SharedPrefix`, rebuilt when first asked for and then kept for one job.

    A job's calls all start with the request the server served before the job changed
    anything; the next job rebuilds it from the rows again.
    """

    def __init__(self, rebuild: Callable[[], Awaitable[SharedPrefix | None]]) -> None:
        self._rebuild = rebuild
        self._rebuilt: list[SharedPrefix | None] = []

    async def get(self) -> SharedPrefix | None:
        if not self._rebuilt:
            self._rebuilt.append(await self._rebuild())
        return self._rebuilt[0]
