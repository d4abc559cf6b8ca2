"""After-turn requests (summaries, collapse notes, memory distillation) that share the conversation's prefix.

A `SharedPrefix` is the conversation's last model request and its reply, rebuilt from the
stored rows (`bot.context.prefix.LastRequests`); `after_turn_request` sends it with the
instruction last (`transcript.after_turn`) and the same tool schemas, which the model may
not call. See docs/context.md, "After-turn requests share the conversation's prefix".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.providers.base import PURPOSE_KEY, ChatRequest, ToolSchema
from transcript import Message
from transcript.after_turn import ConversationPrefix

# An after-turn request keeps at least this many tokens for its own instruction and
# reply beside the conversation's prefix; with less it goes without the prefix.
MIN_INSTRUCTION_ROOM = 256


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
