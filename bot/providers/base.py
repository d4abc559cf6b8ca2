"""What the engine needs from a model provider: a request, and the typed events of its answer."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

# `extra["purpose"]` tells Chorus what a call is for (e.g. SUMMARY_PURPOSE for compaction).
# It describes the call to Chorus, not to the model, so providers never put it in the body.
PURPOSE_KEY = "purpose"
SUMMARY_PURPOSE = "summary"

# A tool the model may call, in the Chat Completions shape:
# {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}.
ToolSchema = dict[str, Any]


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call: OpenAI-format messages plus sampling settings."""

    messages: list[dict[str, Any]]
    model: str
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    # The persona speaking this turn; the demo provider names it in its reply.
    persona_id: str | None = None
    persona_name: str | None = None
    # The messages' tokens as the context builder already counted them (for metrics);
    # None makes whoever needs the number count it.
    prompt_tokens: int | None = None
    # The tools the model may call; with `tool_choice` "none" it sees them but must answer in text.
    tools: tuple[ToolSchema, ...] = ()
    tool_choice: str | None = None
    # How hard the model thinks before answering ("off", "low", "high"), for models that take
    # a level (/think); None: the model's own default.
    thinking: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def purpose(self) -> str | None:
        """What the caller uses this call for, such as `SUMMARY_PURPOSE`; None for a chat turn."""
        return self.extra.get(PURPOSE_KEY)


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's text, in order."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """One complete tool call of the answer: its id, the tool's name and the arguments as sent.

    `arguments` is the model's JSON text, unparsed: whether it is valid is the tool
    runner's question, and a model can be told what was wrong with it.
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's thinking, in order: kept beside the reply, never as its text."""

    text: str


@dataclass(frozen=True)
class Usage:
    """What the server says the call cost, in its own tokenizer's tokens (before `Finish`).

    `prompt_tokens` includes the cached ones; `cached_tokens` were reused from the server's
    prompt cache (None: the server did not say, which is never the same as 0) and
    `cache_write_tokens` written to it (billed differently by most vendors).
    `bot.providers.prompt_cache` reads each server's fields.
    """

    prompt_tokens: int
    completion_tokens: int = 0
    cached_tokens: int | None = None
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def evaluated_tokens(self) -> int | None:
        """The prompt tokens the server computed afresh; None when it did not say what it reused."""
        return None if self.cached_tokens is None else max(self.prompt_tokens - self.cached_tokens, 0)

    def __add__(self, other: Usage) -> Usage:
        """Two calls' usage together, as a turn of several tool rounds is billed.

        What was reused stays unknown when either call left it unknown.
        """
        cached = (
            None
            if self.cached_tokens is None or other.cached_tokens is None
            else self.cached_tokens + other.cached_tokens
        )
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            cached,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True)
class Served:
    """Which model answers, and the provider kind of the endpoint it answers from (before its text).

    A router that moved past a busy key or endpoint says where the answer comes from;
    the engine keeps it on the reply.
    """

    model: str
    provider: str


@dataclass(frozen=True)
class ProviderBlocks:
    """The answer in the provider's own content blocks, to be sent back verbatim (before `Finish`).

    Anthropic's thinking blocks carry a signature and must return unchanged with the
    tool calls they led to, as must the `extra_content` an OpenAI-compatible server (Gemini 3)
    attaches to a call; the engine stores these with the answer, and the transcript
    hands them back under `transcript.PROVIDER_BLOCKS_KEY` of the built message.
    """

    provider: str
    blocks: list[dict[str, Any]]


@dataclass(frozen=True)
class Finish:
    """The answer is complete; `reason` as the model gave it ("stop", "tool_calls", "length" …)."""

    reason: str | None


ModelEvent = TextDelta | ReasoningDelta | ToolCall | Usage | Served | ProviderBlocks | Finish


class ChatProvider(Protocol):
    """Streams an answer as typed events; raises `bot.errors.ProviderError` subclasses.

    A router's stream may open with `Served`, naming the model that answers. Then text
    and reasoning deltas as they arrive, then the answer's tool calls
    (each one whole, in the order the model numbered them), at most one `Usage` when the
    server reports it, the answer's `ProviderBlocks` when the provider has its own, then
    one `Finish`. Consumers ignore events they have no use for.
    """

    name: str

    def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]: ...

    async def complete(self, request: ChatRequest) -> str: ...

    def accepts_tools(self, model: str) -> bool:
        """False once the model's server refused `tools`: its requests go without them."""
        ...

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        """The sampling settings (`temperature`, `top_p`) requests for `model` go without,
        because the provider's client or the model cannot take them; /status names them."""
        ...

    async def discover_window(self, model: str) -> int | None:
        """The context window the server states for `model`, in its tokens; None if it says nothing."""
        ...

    async def aclose(self) -> None: ...


async def collect_text(events: AsyncIterator[ModelEvent]) -> str:
    """Joins an answer's text into one string; how every provider implements `complete`."""
    return "".join([event.text async for event in events if isinstance(event, TextDelta)])


def tool_names(tools: tuple[ToolSchema, ...]) -> set[str]:
    """The names of the tools in a request's `tools`."""
    return {
        str(tool.get("function", {}).get("name")) for tool in tools if isinstance(tool.get("function"), dict)
    }


def tool_name(schema: ToolSchema) -> str:
    """The name of one tool schema ("" when it has none)."""
    function = schema.get("function")
    return str(function.get("name", "")) if isinstance(function, dict) else ""


def shown_model(provider: ChatProvider, model: str) -> str:
    """The model as /status and /context name it: the offline demo model names itself."""
    return "demo" if provider.name == "demo" else model
