"""After-turn requests start with the conversation's last request, byte for byte, instruction last."""

from __future__ import annotations

import json
from typing import Any

from tests.transcript.factories import assistant, build, tool_call, tool_result, user
from transcript import COLLAPSE_INSTRUCTIONS, SummaryItem, TranscriptRow
from transcript.after_turn import after_turn_messages, conversation_prefix, last_reply
from transcript.compaction import SUMMARY_INSTRUCTIONS, summary_request

ROWS = [
    user(1, "We ship the billing service on Friday.", sender_name="Alice"),
    assistant(2, "Noted: billing ships Friday."),
    user(3, "Check the build first.", sender_name="Alice"),
    tool_call(4, ("c1", "build_status", '{"job": 8812}')),
    tool_result(5, "c1", "green"),
    assistant(6, "Build 8812 is green, so Friday holds."),
]
SUMMARY = "Alice and Sage plan a release."
MEMORY = "- Alice leads the billing team."
RECALL = ("Alice said the database moved to PostgreSQL.",)


def as_bytes(messages: Any) -> bytes:
    return json.dumps(messages, ensure_ascii=False, sort_keys=True).encode()


def turn_request_and_prefix() -> tuple[list[dict[str, Any]], tuple[dict[str, Any], ...]]:
    """The turn's request (rows before the reply) and the prefix rebuilt with the reply."""
    options: dict[str, Any] = {"summary": SUMMARY, "memory": MEMORY, "recall": RECALL, "group": True}
    reply = last_reply(ROWS)
    assert reply is not None and reply.seq == 6
    request = build([row for row in ROWS if row.seq < reply.seq], **options)
    following = build(ROWS, **options)
    prefix = conversation_prefix(request, following)
    assert prefix is not None
    return request.messages, prefix.messages


def test_a_summary_request_starts_with_the_turns_request_byte_for_byte_and_asks_last() -> None:
    turn, prefix = turn_request_and_prefix()
    items = [SummaryItem(1, "#1 Alice (user): We ship the billing service on Friday.", 20)]

    messages = summary_request(items, previous=SUMMARY, focus="the release", prefix=prefix)

    assert as_bytes(messages[: len(turn)]) == as_bytes(turn)
    # Then the reply, as the next turn shows it, and the instruction: one user message, last.
    assert messages[len(turn)] == {
        "role": "assistant",
        "content": "Build 8812 is green, so Friday holds.",
        "name": "sage",
    }
    assert len(messages) == len(turn) + 2
    instruction = messages[-1]
    assert instruction["role"] == "user"
    content = instruction["content"]
    assert content.startswith(SUMMARY_INSTRUCTIONS)
    assert "focus on: the release" in content
    assert f"Summary so far:\n{SUMMARY}" in content
    assert content.endswith(
        "#1 Alice (user): We ship the billing service on Friday.\n\nWrite the updated complete summary."
    )
    # One system message, the conversation's own: no prompt of the summariser's before it.
    assert [m["role"] for m in messages].count("system") == 1
    assert messages[0] == turn[0]


def test_a_collapse_request_keeps_its_instructions_in_the_last_message() -> None:
    turn, prefix = turn_request_and_prefix()
    items = [SummaryItem(2, "#2 Sage (assistant, persona sage): Noted: billing ships Friday.", 20)]

    messages = summary_request(items, instructions=COLLAPSE_INSTRUCTIONS, prefix=prefix)

    assert as_bytes(messages[: len(prefix)]) == as_bytes(prefix)
    assert as_bytes(prefix[: len(turn)]) == as_bytes(turn)
    assert messages[-1]["content"].startswith(COLLAPSE_INSTRUCTIONS)


def test_without_a_prefix_the_instruction_is_the_whole_request() -> None:
    items = [SummaryItem(1, "#1 Alice (user): hi", 8)]

    messages = summary_request(items)

    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert messages[0]["content"].startswith(SUMMARY_INSTRUCTIONS)
    assert after_turn_messages((), "distil") == [{"role": "user", "content": "distil"}]


def test_the_last_reply_is_the_newest_persona_message_not_a_call_or_an_event() -> None:
    rows = [
        *ROWS,
        user(7, "And the docs?", sender_name="Bob"),  # recorded after the reply, unanswered
        TranscriptRow(seq=8, role="system", content="thinking", kind="reasoning", persona_id="sage"),
        tool_call(9, ("c2", "search", "{}")),
    ]
    reply = last_reply(rows)
    assert reply is not None and reply.seq == 6
    assert last_reply(ROWS[:5]) == ROWS[1]
    assert last_reply([user(1, "hello")]) is None


def test_a_following_context_that_ends_with_no_reply_gives_no_prefix() -> None:
    request = build(ROWS[:3])
    assert conversation_prefix(request, build(ROWS[:3])) is None
