"""How the offline demo model uses tools, so a newcomer sees them with no API key.

Three phrasings call a tool when it is offered: "what did I say about X" (`recall`),
"remind me in N seconds/minutes/hours to X" (`schedule`) and "how full is your
context" (`context_inspect`). When the last messages are tool results, the demo
answers from them. Anything else is answered as without tools.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.providers.base import ChatRequest, ToolCall, tool_names

_RECALL = re.compile(
    r"\b(?:what did i (?:say|tell you|write|mention) (?:about|regarding)|do you remember|"
    r"what do you remember about)\s+(?P<topic>.+?)[?.!]*$",
    re.IGNORECASE,
)
_REMIND = re.compile(
    r"\bremind me in\s+(?P<count>\d+)\s*(?P<unit>seconds?|secs?|s|minutes?|mins?|m|hours?|h)\b\s*"
    r"(?:to\s+)?(?P<what>.+?)[.!]*$",
    re.IGNORECASE,
)
_CONTEXT = re.compile(r"\bhow (?:full|big|large) is your context\b|\bcontext (?:use|usage)\b", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
_SHORT = 160
# How every reply of the demo begins.
DEMO_MARK = "[demo]"


def demo_tool_call(request: ChatRequest, said: str) -> ToolCall | None:
    """The call the demo makes for the person's last words `said`, if an offered tool fits."""
    offered = tool_names(request.tools)
    number = 1 + sum(1 for message in request.messages if message.get("role") == "tool")
    call_id = f"demo_call_{number}"
    if "recall" in offered and (match := _RECALL.search(said)):
        return ToolCall(call_id, "recall", _arguments(query=match.group("topic").strip()))
    if "schedule" in offered and (match := _REMIND.search(said)):
        seconds = int(match.group("count")) * _UNIT_SECONDS[match.group("unit")[0].lower()]
        return ToolCall(call_id, "schedule", _arguments(text=match.group("what").strip(), in_seconds=seconds))
    if "context_inspect" in offered and _CONTEXT.search(said):
        return ToolCall(call_id, "context_inspect", "{}")
    return None


def demo_tool_answer(messages: list[dict[str, Any]]) -> str | None:
    """The demo's answer when the conversation ends with tool results; None otherwise."""
    results: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, message)
    if not results:
        return None
    names = _call_names(messages[-len(results) - 1])
    lines = [_result_line(names.get(str(result.get("tool_call_id")), "a tool"), result) for result in results]
    return f"{DEMO_MARK} " + " ".join(lines)


def _result_line(name: str, message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if text.startswith("Error:"):
        return f"{name} failed — {_shorten(text.removeprefix('Error:').strip())}"
    try:
        data = json.loads(text)
    except ValueError:
        return f"{name} said: {_shorten(text)}"
    if name == "recall" and isinstance(data, dict):
        hits = data.get("hits") or []
        if not hits:
            return f"I searched my memory for “{data.get('query', '')}” and found nothing."
        # The demo's own replies quote the person's words back: the first hit of someone else's.
        said = [
            hit
            for hit in hits
            if isinstance(hit, dict) and not str(hit.get("text", "")).startswith(DEMO_MARK)
        ]
        first = said[0] if said else hits[0] if isinstance(hits[0], dict) else {}
        when = f" ({first['date']})" if first.get("date") else ""
        found = _shorten(str(first.get("text", "")))
        if first.get("in_context"):
            seqs = first.get("seqs")
            where = f", message #{seqs[0]}" if isinstance(seqs, list) and seqs else ""
            return f"That is still in our conversation{where}: “{found}”{when}."
        return f"I searched my memory for “{data.get('query', '')}”: {found}{when}."
    if name == "context_inspect" and isinstance(data, dict):
        tokens = data.get("tokens")
        tokens = tokens if isinstance(tokens, dict) else {}
        total, budget = tokens.get("total"), tokens.get("budget")
        if isinstance(total, int) and isinstance(budget, int) and budget:
            return f"My context holds {total:,} of {budget:,} tokens ({100 * total / budget:.0f}%)."
    if name == "schedule" and isinstance(data, dict) and data.get("text"):
        return f"Done — I will remind you “{data['text']}” at {data.get('due_local') or data.get('due_at')}."
    return f"{name} returned {_shorten(text)}"


def _call_names(message: dict[str, Any]) -> dict[str, str]:
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    return {
        str(call.get("id")): str(call.get("function", {}).get("name"))
        for call in calls or []
        if isinstance(call, dict)
    }


def _arguments(**values: object) -> str:
    return json.dumps(values, ensure_ascii=False)


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SHORT else flat[: _SHORT - 1].rstrip() + "…"
