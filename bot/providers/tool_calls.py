"""Streamed tool calls, joined back into whole calls.

The Chat Completions API streams each tool call in fragments keyed by `index`: the first
carries `id`, `type` and `function.name`, later ones pieces of `function.arguments`, and
the fragments of parallel calls may interleave. Servers that imitate the API differ at
the edges (no `index`, one `index` for every parallel call, the `id` repeated on every
fragment, arguments sent whole as an object), so the rules below follow what those servers send.
A call may carry an `extra_content` object (Gemini 3 signs its calls there); it is kept
as it came, for the call to go back with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.providers.base import ToolCall


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    extra_content: dict[str, Any] | None = None


class ToolCallAssembler:
    """Collects the `tool_calls` fragments of one answer; `calls()` gives them whole, by index."""

    def __init__(self) -> None:
        self._partial: dict[int, _PartialCall] = {}
        self._last_index: int | None = None

    @property
    def started(self) -> bool:
        """Whether any fragment arrived (an answer that began calling tools cannot be re-asked)."""
        return bool(self._partial)

    def add(self, fragments: object) -> None:
        """One delta's `tool_calls` list; anything that is not a fragment is ignored."""
        if not isinstance(fragments, list):
            return
        for fragment in fragments:
            if isinstance(fragment, dict):
                self._add_fragment(fragment)

    def add_whole(self, message: object) -> None:
        """The `tool_calls` of a non-streamed answer's `message`, each call whole."""
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list):
            start = len(self._partial)
            self.add([{**call, "index": start + i} for i, call in enumerate(calls) if isinstance(call, dict)])

    def calls(self) -> list[ToolCall]:
        return [
            ToolCall(
                id=_call_id(index, partial),
                name=partial.name,
                arguments="".join(partial.arguments),
            )
            for index, partial in sorted(self._partial.items())
        ]

    def extra_contents(self) -> dict[str, dict[str, Any]]:
        """The `extra_content` of each call that came with one, by the call's id, unchanged."""
        return {
            _call_id(index, partial): partial.extra_content
            for index, partial in sorted(self._partial.items())
            if partial.extra_content is not None
        }

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        index = self._index_of(fragment)
        partial = self._partial.setdefault(index, _PartialCall())
        self._last_index = index
        call_id = fragment.get("id")
        if isinstance(call_id, str) and call_id and not partial.id:
            partial.id = call_id
        extra_content = fragment.get("extra_content")
        if isinstance(extra_content, dict) and partial.extra_content is None:
            partial.extra_content = extra_content
        function = fragment.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        # Some servers repeat the whole name on every fragment, a few stream it in pieces.
        if isinstance(name, str) and name and name != partial.name:
            partial.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            partial.arguments.append(arguments)
        elif isinstance(arguments, dict):
            partial.arguments.append(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")))

    def _index_of(self, fragment: dict[str, Any]) -> int:
        index = fragment.get("index")
        call_id = fragment.get("id")
        known = {partial.id: key for key, partial in self._partial.items()}
        if isinstance(index, int) and not isinstance(index, bool):
            taken = self._partial.get(index)
            # Gemini's OpenAI-compatible stream numbers parallel calls all 0, each whole with
            # its own id: an id other than the one at that index is another call.
            if taken is None or not taken.id or not isinstance(call_id, str) or call_id in ("", taken.id):
                return index
            return known.get(call_id, max(self._partial) + 1)
        # No index: a fragment with an id not seen yet starts a call, anything else continues one.
        if isinstance(call_id, str) and call_id:
            if call_id in known:
                return known[call_id]
            return max(self._partial, default=-1) + 1
        return self._last_index if self._last_index is not None else 0


def _call_id(index: int, partial: _PartialCall) -> str:
    # A server that sends no id still needs one: the call's result answers it by id.
    return partial.id or f"call_{index}"
