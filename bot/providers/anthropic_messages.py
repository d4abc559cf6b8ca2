"""A `ChatRequest` as the Anthropic Messages API takes it: system apart, content blocks, cache breakpoints.

Chorus builds OpenAI-format messages; this module turns them into Messages API parameters
(pure, no I/O) so the provider in `bot.providers.anthropic` only streams. An assistant
message that carries Anthropic's own blocks (`PROVIDER_BLOCKS_KEY`) is sent as they came,
signed thinking blocks included, instead of being rebuilt from its text and calls.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from bot.providers.base import ChatRequest, tool_name
from transcript import PROVIDER_BLOCKS_KEY
from transcript.preamble import DOCUMENTS_HEADING, MEMORY_HEADING, RECALL_HEADING, SUMMARY_HEADING, section

# Where an `anthropic` endpoint without a base URL goes.
DEFAULT_BASE_URL = "https://api.anthropic.com"

PROVIDER = "anthropic"

# The API takes at most four cache breakpoints a request.
MAX_CACHE_BREAKPOINTS = 4
CACHE_BREAKPOINT = {"type": "ephemeral"}

# `ChatRequest.thinking` → budget_tokens; the API's smallest budget is 1,024 tokens.
THINKING_BUDGETS = {"low": 2048, "high": 16384}
# The reply's own room when the request names none (the API requires max_tokens).
DEFAULT_MAX_TOKENS = 4096

# The sampling settings a request may carry; an SDK without one sends the request without it.
SAMPLING_SETTINGS = ("temperature", "top_p")

# Said in place of a first message when the history starts with the assistant (a greeting):
# the API wants the conversation to open with the user.
CONVERSATION_START = "(The conversation starts.)"

Block = dict[str, Any]
Message = dict[str, Any]

# Where the system message's sections start (`transcript.preamble`): the persona prompt
# comes first, then what changes now and then (the summary, the memory snapshot), then
# what changes every turn (what recall found, documents outside the window). Each becomes
# a block of its own, so the prefix up to the last steady one is cached.
_STEADY_SECTIONS = tuple("\n\n" + section(heading, "") for heading in (SUMMARY_HEADING, MEMORY_HEADING))
_CHANGING_SECTIONS = tuple("\n\n" + section(heading, "") for heading in (RECALL_HEADING, DOCUMENTS_HEADING))


def request_params(request: ChatRequest, *, cache: bool = True) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for `request` (without `stream`), as the API takes them.

    Which of them the installed SDK can send is the provider's question (`sendable_params`).
    """
    system, messages = convert_messages(request.messages)
    tools = [convert_tool(schema) for schema in sorted(request.tools, key=tool_name)]
    if cache:
        add_cache_breakpoints(tools, system, messages)
    budget = THINKING_BUDGETS.get(request.thinking or "off")
    if budget is not None and _continues_round_without_thinking(messages):
        # The round began without thinking (another provider answered it, or /think was
        # off then): the API refuses thinking for its rest, so the rest goes without.
        budget = None
    reply_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
    params: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": reply_tokens + (budget or 0),
    }
    if system:
        params["system"] = system
    if tools:
        params["tools"] = tools
        if request.tool_choice in ("none", "auto", "any"):
            params["tool_choice"] = {"type": request.tool_choice}
    if budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    else:
        # Thinking allows no temperature and only a top_p near 1, so both go only without it.
        # Current models refuse temperature and top_p together: temperature, the usual knob, wins.
        if request.temperature is not None:
            params["temperature"] = request.temperature
        elif request.top_p is not None:
            params["top_p"] = request.top_p
    return params


def sendable_params(params: dict[str, Any], accepted: frozenset[str]) -> tuple[dict[str, Any], list[str]]:
    """`params` without what `messages.create` does not take (`accepted`: its parameter names),
    and the names left out: an SDK that lacks a setting raises TypeError before any request."""
    kept = {name: value for name, value in params.items() if name in accepted}
    return kept, sorted(set(params) - set(kept))


def convert_messages(messages: list[Message]) -> tuple[list[Block], list[Message]]:
    """The system blocks and the alternating user/assistant messages of OpenAI-format `messages`.

    Leading system messages become the system prompt, one block each; a system message
    later in the history (a note) is said to the model as user text. Consecutive messages
    of one role are merged, as the API requires turns to alternate.
    """
    system: list[Block] = []
    converted: list[Message] = []
    for message in messages:
        role = message.get("role")
        if role == "system" and not converted:
            content = message.get("content")
            system.extend(_preamble_blocks(content) if isinstance(content, str) else _text_blocks(content))
            continue
        if role == "assistant":
            blocks = _assistant_blocks(message)
        elif role == "tool":
            blocks = [_tool_result(message)]
            role = "user"
        else:
            blocks = _user_blocks(message.get("content"))
            role = "user"
        if not blocks:
            continue
        if converted and converted[-1]["role"] == role:
            converted[-1]["content"].extend(blocks)
        else:
            converted.append({"role": role, "content": blocks})
    if converted and converted[0]["role"] == "assistant":
        converted.insert(0, {"role": "user", "content": [_text(CONVERSATION_START)]})
    return system, converted


def convert_tool(schema: dict[str, Any]) -> Block:
    """A Chat Completions tool schema as a Messages API tool."""
    function = schema.get("function", {})
    tool: Block = {
        "name": function.get("name", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def add_cache_breakpoints(tools: list[Block], system: list[Block], messages: list[Message]) -> int:
    """Marks the stable prefix for the prompt cache; returns how many breakpoints were set.

    In prefix order: the last tool, the first system block when the system prompt has more
    than one (the persona, before a memory snapshot that changes more often), the last
    system block that does not change every turn, and the history up to the previous turn
    (the last message before the newest user message). Every later request that starts
    with one of these prefixes reads it from the cache at a tenth of the price.
    """
    marked: list[Block] = []
    if tools:
        marked.append(tools[-1])
    steady = [block for block in system if not block["text"].startswith(_CHANGING_SECTIONS)]
    if len(steady) > 1:
        marked.append(steady[0])
    if steady:
        marked.append(steady[-1])
    previous = _message_before_newest_user(messages)
    if previous is not None and (block := _cacheable_block(previous)) is not None:
        marked.append(block)
    # Never more than the API allows: the breakpoints nearest the history matter most.
    marked = marked[-MAX_CACHE_BREAKPOINTS:]
    for block in marked:
        block["cache_control"] = dict(CACHE_BREAKPOINT)
    return len(marked)


def _preamble_blocks(text: str) -> list[Block]:
    """The system message in its steady and changing parts, one text block each."""
    cuts = [
        min((at for mark in marks if (at := text.find(mark)) > 0), default=-1)
        for marks in (_STEADY_SECTIONS, _CHANGING_SECTIONS)
    ]
    starts = sorted({0, *(cut for cut in cuts if cut > 0)})
    pieces = [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)], strict=True)]
    # Each later block keeps its leading blank line: the blocks read as the one message did.
    return [_text(piece) for piece in pieces if piece.strip()]


def _continues_round_without_thinking(messages: list[Message]) -> bool:
    """Whether the request answers tool calls of an assistant message that starts without thinking."""
    if len(messages) < 2 or messages[-2]["role"] != "assistant":
        return False
    blocks: list[Block] = messages[-2]["content"]
    calls = any(block.get("type") == "tool_use" for block in blocks)
    return calls and blocks[0].get("type") not in ("thinking", "redacted_thinking")


def _message_before_newest_user(messages: list[Message]) -> Message | None:
    for index in range(len(messages) - 1, 0, -1):
        if messages[index]["role"] == "user":
            return messages[index - 1]
    return None


def _cacheable_block(message: Message) -> Block | None:
    # Thinking blocks cannot carry cache_control; the prefix through the next block covers them.
    blocks: list[Block] = message["content"]
    for block in reversed(blocks):
        if block.get("type") not in ("thinking", "redacted_thinking"):
            return block
    return None


def _assistant_blocks(message: Message) -> list[Block]:
    own = message.get(PROVIDER_BLOCKS_KEY)
    if isinstance(own, dict) and own.get("provider") == PROVIDER and isinstance(own.get("blocks"), list):
        # Copied: cache breakpoints are added to the blocks, never to the stored history.
        return copy.deepcopy(own["blocks"])
    blocks = _text_blocks(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id", ""),
                "name": function.get("name", ""),
                "input": _arguments(function.get("arguments")),
            }
        )
    return blocks


def _arguments(arguments: Any) -> dict[str, Any]:
    """A call's JSON text as the object the API wants; text that is no object is kept whole."""
    if not arguments:
        return {}
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return {"arguments": str(arguments)}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _tool_result(message: Message) -> Block:
    content = message.get("content")
    text = content if isinstance(content, str) else " ".join(b["text"] for b in _text_blocks(content))
    result: Block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", "")}
    if text:
        result["content"] = text
    return result


def _user_blocks(content: Any) -> list[Block]:
    if not isinstance(content, list):
        return _text_blocks(content)
    blocks: list[Block] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("text"):
            blocks.append(_text(part["text"]))
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            blocks.append(_image(url))
    return blocks


def _text_blocks(content: Any) -> list[Block]:
    """Text content as text blocks; the API refuses empty ones, so there are none."""
    if isinstance(content, str):
        return [_text(content)] if content.strip() else []
    if isinstance(content, list):
        return [
            _text(part["text"])
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"].strip()
        ]
    return []


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _image(url: str) -> Block:
    if url.startswith("data:") and ";base64," in url:
        header, data = url[len("data:") :].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": header, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}
