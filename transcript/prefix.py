"""Where a model request stops starting like the conversation's previous one.

A server's prompt cache reuses the longest prefix a request shares with an earlier one.
Chorus builds requests steady first and changing last: tools, system prompt, history, then
the newest user message, which carries the turn's note (recall) and so changes by the
next turn. Up to that message the previous request should lead the next; `first_change`
names the first part that did not (another model reuses nothing). Pure: the caller keeps the
prints and names the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

PromptPart = Literal["model", "tools", "system", "message"]


@dataclass(frozen=True)
class PromptPrint:
    """A request's parts as digests: enough to tell which part changed, none of its text."""

    model: str  # another model's cache holds nothing of this one's prompts
    tools: str
    system: str
    messages: tuple[str, ...]
    # The first message the next request may change: the newest user message (its note goes).
    open_from: int


@dataclass(frozen=True)
class PrefixChange:
    """The first part of a request that differs from the previous one's steady prefix."""

    part: PromptPart
    index: int | None = None  # the message's place after the system prompt, from 0

    def describe(self) -> str:
        if self.part == "model":
            return "the model"
        if self.part == "tools":
            return "the tool list"
        if self.part == "system":
            return "the system prompt"
        return f"message {(self.index or 0) + 1} after the system prompt"


@dataclass(frozen=True)
class PrefixHistory:
    """What one conversation's requests since the process started did to the prompt prefix."""

    compared: int  # requests compared with the one before them
    breaks: Mapping[str, int] = field(default_factory=dict)  # by reason
    last_change: PrefixChange | None = None
    last_reason: str | None = None
    # Whether the newest request broke the prefix (the last break may be older).
    newest_broke: bool = False


def prompt_print(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], model: str = ""
) -> PromptPrint:
    """The print of a request to `model`: its messages (OpenAI format) and tool schemas.

    Tools are printed in name order, as they are sent; the leading system messages are
    the system prompt.
    """
    leading = 0
    while leading < len(messages) and messages[leading].get("role") == "system":
        leading += 1
    rest = messages[leading:]
    users = [index for index, message in enumerate(rest) if message.get("role") == "user"]
    ordered = sorted(tools, key=_tool_name)
    return PromptPrint(
        model=model,
        tools=_digest(ordered),
        system=_digest(messages[:leading]),
        messages=tuple(_digest(message) for message in rest),
        open_from=users[-1] if users else len(rest),
    )


def first_change(previous: PromptPrint, current: PromptPrint) -> PrefixChange | None:
    """The first part of `current` that breaks `previous`'s steady prefix; None when it holds."""
    if previous.model != current.model:
        return PrefixChange("model")
    if previous.tools != current.tools:
        return PrefixChange("tools")
    if previous.system != current.system:
        return PrefixChange("system")
    for index in range(previous.open_from):
        if index >= len(current.messages) or previous.messages[index] != current.messages[index]:
            return PrefixChange("message", index)
    return None


def prefix_line(history: PrefixHistory | None) -> str:
    """The `/context` line: whether the newest request kept the previous one's prefix, and the breaks."""
    if history is None or not history.compared:
        return "Prompt prefix: unknown (no two requests of this conversation since Chorus started)."
    if history.newest_broke and history.last_change is not None:
        newest = f"the newest request broke it at {history.last_change.describe()} ({history.last_reason})"
    else:
        newest = "the newest request kept the previous one's"
    breaks = ", ".join(f"{reason} {count}" for reason, count in sorted(history.breaks.items()))
    return f"Prompt prefix: {newest}; {history.compared} compared since Chorus started, " + (
        f"breaks: {breaks}." if breaks else "no breaks."
    )


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    return str(function.get("name", "")) if isinstance(function, Mapping) else ""


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
