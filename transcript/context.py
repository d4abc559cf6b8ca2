"""What `build_context` returns: the model's messages and what it took to make them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transcript.shedding import ShedNote

# One OpenAI-format chat message, ready to be sent as JSON.
Message = dict[str, Any]

# The key of an assistant message that carries its row's `provider_blocks`: the provider
# that made them replays them, every other provider leaves the key out of its request.
PROVIDER_BLOCKS_KEY = "provider_blocks"


@dataclass(frozen=True)
class TokensByPart:
    """Tokens per part of the request, as `/context` shows them."""

    system: int  # the persona prompt and the system message's own overhead
    summary: int
    memory: int
    recall: int
    documents: int  # documents listed in the preamble, shared earlier
    history: int  # the kept messages' text, names and overhead (tool calls and results included)
    attachments: int  # images, documents and voice notes inside the kept messages
    tools: int = 0  # the schemas of the tools offered


@dataclass(frozen=True)
class ContextStats:
    messages_considered: int  # rows passed in, malformed ones included
    messages_kept: int
    messages_dropped: int
    # Of those, rows the window's message count held that the token or character budget
    # left out: with more fixed text (a longer summary, recalled lines) a context keeps
    # fewer rows only when this is above 0 or its budget is nearly spent.
    dropped_for_budget: int
    kept_seqs: tuple[int, ...]
    newest_truncated: bool  # the newest user message alone overflowed and was cut
    tokens: TokensByPart
    total_tokens: int
    budget_tokens: int | None
    # What a tight window left out (transcript.shedding), one line per part.
    shed: tuple[ShedNote, ...] = ()
    # The newest person's message, in tokens, and how far the instructions and it alone
    # were over the budget (0: it fits; above 0 it was cut, and a turn refuses it instead).
    question_tokens: int = 0
    question_excess_tokens: int = 0


@dataclass(frozen=True)
class Context:
    messages: list[Message]
    stats: ContextStats
    # The tools whose schemas fit, in the budget's order: the request offers these only.
    tools: tuple[str, ...] = ()
