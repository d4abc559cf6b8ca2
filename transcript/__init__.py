"""Pure functions from a session's stored rows to the model's messages for one turn.

Owns `CONTEXT_COUNT`, token counting, the rolling window and the context contract
(DESIGN §6). The engine calls `build_context` each turn; lanes only read
`CONTEXT_COUNT`. It must not do I/O, hold state between turns or decide identity,
and never imports aiogram, discord, fastapi, sqlmodel, httpx, `bot` or `channels`.
"""

from __future__ import annotations

from transcript.budget import Budget, Capabilities
from transcript.build import PersonaLike, build_context
from transcript.context import Context, ContextStats, Message, TokensByPart
from transcript.limits import CONTEXT_COUNT, DEFAULT_CHAR_CAP
from transcript.names import sanitise_name
from transcript.rows import AttachmentRef, TranscriptRow
from transcript.tokens import count_message_tokens, count_tokens, truncate_to_tokens
from transcript.window import RowLike, window

__all__ = [
    "CONTEXT_COUNT",
    "DEFAULT_CHAR_CAP",
    "AttachmentRef",
    "Budget",
    "Capabilities",
    "Context",
    "ContextStats",
    "Message",
    "PersonaLike",
    "RowLike",
    "TokensByPart",
    "TranscriptRow",
    "build_context",
    "count_message_tokens",
    "count_tokens",
    "sanitise_name",
    "truncate_to_tokens",
    "window",
]
