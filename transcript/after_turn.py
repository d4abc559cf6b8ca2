"""After-turn requests that share the conversation's prefix (docs/context.md, "After-turn requests").

Compaction, collapse and memory distillation ask the conversation's model once a turn is
stored. A server keeps the prompt of the request it served last (llama.cpp's slot; a vendor's
prompt cache): a request with a system prompt of its own would evict the conversation from a
one-slot server and pay for the whole prompt again, twice. So each after-turn request begins
with the messages of the conversation's last model request, byte for byte, then that request's
reply, and puts its own instruction last, as one user message: the server reuses what it has,
evaluates only the instruction, and the conversation is still cached for the next turn.

Pure: the caller rebuilds the last request from stored rows (the same build a turn makes)
and hands its messages here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transcript.context import Context, Message
from transcript.kinds import is_reply
from transcript.rows import TranscriptRow
from transcript.tokens import count_message_tokens


@dataclass(frozen=True)
class ConversationPrefix:
    """The conversation's last model request and its reply: what an after-turn request starts with.

    `tools` are the names of the tools that request offered, in its order (the caller keeps
    their schemas, so the after-turn request carries the same ones); `tokens` what the
    messages cost in Chorus's count.
    """

    messages: tuple[Message, ...]
    tools: tuple[str, ...]
    tokens: int


def last_reply(rows: Sequence[TranscriptRow]) -> TranscriptRow | None:
    """The newest reply a persona gave in `rows` (a stored text message), or None.

    The request that produced it is the conversation's last one that rows can rebuild;
    rows after it (group messages recorded since, unanswered) follow in the instruction.
    """
    for row in reversed(rows):
        if is_reply(row.kind, row.role):
            return row if row.content.strip() else None
    return None


def conversation_prefix(request: Context, following: Context) -> ConversationPrefix | None:
    """The last request's messages (`request`, built as the turn built it) and its reply.

    `following` is the context built from the same rows with the reply as the newest: its
    last message is the reply as the next turn shows it. None when it is not a reply.
    """
    if not following.messages or not request.messages:
        return None
    reply = following.messages[-1]
    if reply.get("role") != "assistant" or reply.get("tool_calls"):
        return None
    messages = (*request.messages, reply)
    return ConversationPrefix(
        messages=messages,
        tools=request.tools,
        tokens=request.stats.total_tokens + count_message_tokens(reply),
    )


def after_turn_messages(prefix: Sequence[Message], instruction: str) -> list[Message]:
    """`prefix` unchanged, then `instruction` as the last message, a user's.

    Never a second system message (Anthropic takes one system prompt, and a server's cache
    would stop at it); the prefix ends with the persona's reply, so the user message
    alternates with it. With no prefix the instruction is the whole request.
    """
    return [*prefix, {"role": "user", "content": instruction}]
