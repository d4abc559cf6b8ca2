"""Small builders for transcript tests: rows, a persona, and a build with defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transcript import (
    AttachmentRef,
    Budget,
    Capabilities,
    Context,
    StoredToolCall,
    TranscriptRow,
    build_context,
)
from transcript.limits import CONTEXT_COUNT


@dataclass(frozen=True)
class Persona:
    id: str = "sage"
    name: str = "Sage"
    system_prompt: str = "You are Sage."


def user(seq: int, content: str, **fields: Any) -> TranscriptRow:
    return TranscriptRow(seq=seq, role="user", content=content, **fields)


def assistant(seq: int, content: str, persona_id: str = "sage", **fields: Any) -> TranscriptRow:
    return TranscriptRow(seq=seq, role="assistant", content=content, persona_id=persona_id, **fields)


def document(filename: str, text: str | None, sha256: str | None = None) -> AttachmentRef:
    return AttachmentRef(
        kind="document",
        filename=filename,
        mime_type="application/pdf",
        size=2048,
        sha256=sha256 or f"sha-{filename}",
        text=text,
    )


def image(filename: str = "cat.jpg", data_url: str | None = None) -> AttachmentRef:
    return AttachmentRef(
        kind="image",
        filename=filename,
        mime_type="image/jpeg",
        size=120 * 1024,
        sha256=f"sha-{filename}",
        data_url=data_url,
    )


def build(
    rows: Any,
    *,
    budget: Budget | None = None,
    capabilities: Capabilities | None = None,
    persona: Persona | None = None,
    **options: Any,
) -> Context:
    return build_context(
        rows,
        persona=persona or Persona(),
        budget=budget or Budget(),
        capabilities=capabilities or Capabilities(),
        **options,
    )


def history(context: Context) -> list[dict[str, Any]]:
    """The messages after the system message."""
    assert context.messages[0]["role"] == "system"
    return context.messages[1:]


def tool_call(
    seq: int, *calls: tuple[str, str, str], text: str = "", persona_id: str = "sage"
) -> TranscriptRow:
    """An assistant row calling tools; each call is (id, name, arguments)."""
    return TranscriptRow(
        seq=seq,
        role="assistant",
        content=text,
        persona_id=persona_id,
        kind="tool_call",
        tool_calls=tuple(StoredToolCall(*call) for call in calls),
    )


def tool_result(seq: int, call_id: str, content: str, name: str = "recall", **fields: Any) -> TranscriptRow:
    return TranscriptRow(
        seq=seq,
        role="tool",
        kind="tool_result",
        content=content,
        tool_call_id=call_id,
        tool_name=name,
        **fields,
    )


def rolling(**fields: Any) -> Budget:
    """A budget with seed 000's rolling window (a step of one), for tests of its exact behaviour."""
    return Budget(low_water=fields.get("max_messages", CONTEXT_COUNT), **fields)
