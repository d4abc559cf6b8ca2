"""The `extra_content` an OpenAI-compatible server attaches to a tool call, kept and sent back.

Gemini 3's OpenAI-compatible endpoint signs its calls in `extra_content.google.thought_signature`
and refuses (HTTP 400) a request whose call of the current turn comes back without it. Any
server's `extra_content` is opaque here and carried alike: as the answer's provider blocks,
stored with its `tool_call` row, then put back unchanged on its call in requests to the model
that sent it. Requests to other models, and messages without such blocks, are left as they are.
"""

from __future__ import annotations

from typing import Any

from transcript import PROVIDER_BLOCKS_KEY

# The `provider` of the blocks the OpenAI-compatible provider stores (`ProviderBlocks`).
PROVIDER = "openai"


def extra_content_blocks(extra_contents: dict[str, dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """One block per call that came with `extra_content`, naming the call and the model that sent it."""
    return [
        {"tool_call_id": call_id, "model": model, "extra_content": extra_content}
        for call_id, extra_content in extra_contents.items()
    ]


def with_extra_content(message: dict[str, Any], model: str) -> dict[str, Any]:
    """`message` as a request to `model` sends it: without provider blocks, its calls with
    the `extra_content` `model` attached to them."""
    if PROVIDER_BLOCKS_KEY not in message:
        return message
    sent = {key: value for key, value in message.items() if key != PROVIDER_BLOCKS_KEY}
    extra_contents = _extra_contents(message[PROVIDER_BLOCKS_KEY], model)
    calls = sent.get("tool_calls")
    if extra_contents and isinstance(calls, list):
        sent["tool_calls"] = [_with_extra_content(call, extra_contents) for call in calls]
    return sent


def _extra_contents(stored: object, model: str) -> dict[str, object]:
    """The `extra_content` by call id that `model` sent, from a message's provider blocks."""
    if not isinstance(stored, dict) or stored.get("provider") != PROVIDER:
        return {}
    blocks = stored.get("blocks")
    return {
        block["tool_call_id"]: block["extra_content"]
        for block in (blocks if isinstance(blocks, list) else ())
        if isinstance(block, dict)
        and block.get("model") == model
        and isinstance(block.get("tool_call_id"), str)
        and "extra_content" in block
    }


def _with_extra_content(call: Any, extra_contents: dict[str, object]) -> Any:
    call_id = call.get("id") if isinstance(call, dict) else None
    if isinstance(call_id, str) and call_id in extra_contents:
        return {**call, "extra_content": extra_contents[call_id]}
    return call
