"""An offline, deterministic stand-in model: Chorus works before a real one is configured."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator
from typing import Any

from bot.errors import ContextOverflowError, OverflowNumbers
from bot.providers.base import (
    SUMMARY_PURPOSE,
    ChatRequest,
    Finish,
    ModelEvent,
    TextDelta,
    ToolCall,
    Usage,
    collect_text,
)
from bot.providers.demo_tools import DEMO_MARK, demo_tool_answer, demo_tool_call
from transcript import count_message_tokens, count_tokens

_ATTACHMENT_MARKER = re.compile(r"\[(?:document|image):")
_FIRST_SENTENCE = re.compile(r"^.*?[.!?](?=\s|$)", re.DOTALL)
_QUOTE_LIMIT = 120
# A message a summariser's instruction lists: "#12 Alice (user): text".
_FOLDED_LINE = re.compile(r"^#\d+ [^:\n]+: (.+)$", re.M)
_SUMMARY_LIMIT = 800


class DemoProvider:
    """Replies by describing what it received: persona, history, attachments, last message.

    That makes the demo useful for checking what the engine sends, and its replies stable
    enough for tests. Summary requests get an extractive summary instead.

    With a `window` (`model.demo_window`) it behaves like a small local model: it states the
    window when asked, reports usage, and refuses a request larger than the window in
    llama.cpp's words — so shedding and learning can be watched without a server.
    """

    name = "demo"

    def __init__(self, window: int | None = None) -> None:
        self.window = window

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        prompt_tokens = _prompt_tokens(request) if self.window is not None else 0
        if self.window is not None and prompt_tokens > self.window:
            raise ContextOverflowError(
                "The conversation is too long for the model's context window (request "
                f"({prompt_tokens} tokens) exceeds the available context size ({self.window} tokens)).",
                OverflowNumbers(window=self.window, requested=prompt_tokens),
            )
        if request.purpose == SUMMARY_PURPOSE:
            text = summarise(request.messages)
        else:
            call = _tool_call_for(request)
            if call is not None:
                yield call
                if self.window is not None:
                    yield Usage(prompt_tokens=prompt_tokens)
                yield Finish("tool_calls")
                return
            text = demo_tool_answer(request.messages) or describe(request)
        # Word by word, so lanes exercise their streaming paths without real delays.
        for piece in re.findall(r"\S+\s*", text):
            yield TextDelta(piece)
            await asyncio.sleep(0)
        if self.window is not None:
            yield Usage(prompt_tokens=prompt_tokens)
        yield Finish("stop")

    async def complete(self, request: ChatRequest) -> str:
        return await collect_text(self.stream(request))

    async def discover_window(self, model: str) -> int | None:
        return self.window

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        return ()

    def accepts_tools(self, model: str) -> bool:
        return True

    async def aclose(self) -> None:
        return None


def _prompt_tokens(request: ChatRequest) -> int:
    """The request's size as this model counts it: Chorus's count of its messages and tools."""
    tools = sum(count_tokens(json.dumps(tool, ensure_ascii=False)) for tool in request.tools)
    return sum(count_message_tokens(message) for message in request.messages) + tools


def _tool_call_for(request: ChatRequest) -> ToolCall | None:
    """A tool call when the person's newest message (not yet answered by a tool) asks for one."""
    messages = request.messages
    if (
        not request.tools
        or request.tool_choice == "none"
        or not messages
        or messages[-1].get("role") != "user"
    ):
        return None
    return demo_tool_call(request, _text_of(messages[-1]))


def describe(request: ChatRequest) -> str:
    """The demo's chat reply."""
    messages = request.messages
    last_user = _last_user_index(messages)
    history = sum(1 for message in messages[: max(last_user, 0)] if message.get("role") != "system")
    attachments = sum(_count_attachments(message) for message in messages)
    said = _text_of(messages[last_user]) if last_user >= 0 else ""
    heard = f"You said: “{_shorten(said, _QUOTE_LIMIT)}”." if said else "You sent no text."
    return (
        f"{DEMO_MARK} {_speaker(request)} here — I received {_plural(history, 'history message')} "
        f"and {_plural(attachments, 'attachment')}. {heard} This is the offline demo model; "
        "set CHORUS_MODEL_BASE_URL to use a real one."
    )


def summarise(messages: list[dict[str, Any]]) -> str:
    """The first sentence of each message to fold in, joined and capped.

    A summariser's request lists them in its last message, after the conversation it
    starts with (`transcript.after_turn`); without that list, every user and assistant
    message is one.
    """
    last = messages[-1].get("content") if messages else None
    texts = _folded_lines(last) if isinstance(last, str) else []
    if not texts:
        texts = [_text_of(m) for m in messages if m.get("role") in ("user", "assistant")]
    sentences = []
    for text in texts:
        if text:
            match = _FIRST_SENTENCE.match(text)
            sentences.append(match.group(0) if match else text)
    return _shorten("[demo summary] " + " ".join(sentences), _SUMMARY_LIMIT)


def _folded_lines(instruction: str) -> list[str]:
    """The texts of the `#seq Speaker: text` lines a summariser's instruction lists."""
    return [match.group(1) for match in _FOLDED_LINE.finditer(instruction)]


def _speaker(request: ChatRequest) -> str:
    if request.persona_name and request.persona_id:
        return f"{request.persona_name} (persona {request.persona_id})"
    if request.persona_name:
        return request.persona_name
    if request.persona_id:
        return f"Persona {request.persona_id}"
    return "Chorus"


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return -1


def _count_attachments(message: dict[str, Any]) -> int:
    content = message.get("content")
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    count = 0
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url":
            count += 1
        elif isinstance(part.get("text"), str):
            count += len(_ATTACHMENT_MARKER.findall(part["text"]))
    return count


def _text_of(message: dict[str, Any]) -> str:
    """A message's text with whitespace collapsed; text parts are joined."""
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return " ".join(content.split()) if isinstance(content, str) else ""


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
