"""The stepped window through the engine: over 30 turns the prompt stays put between steps.

Between two steps each request's messages lead the next request's and the system message
is byte-identical, although a summary (compaction after the first step) and a memory item
arrive in between: each follows the history, beside the newest user message, until the
next step takes it into the system message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.context.helpers import chat_requests, runtime, say, session_of
from tests.fakes.openai_server import FakeOpenAI
from transcript.preamble import (
    MEMORY_HEADING,
    NEW_MEMORY_HEADING,
    NEW_SUMMARY_HEADING,
    RECALL_HEADING,
    SUMMARY_HEADING,
)

FACT = "Alice's flight is LH 454 on the third"


def without_note(messages: list[dict[str, Any]]) -> list[str]:
    """The request's messages as JSON, the newest user message without the turn's note."""
    shown = [dict(message) for message in messages]
    content = shown[-1]["content"]
    for heading in (NEW_SUMMARY_HEADING, NEW_MEMORY_HEADING, RECALL_HEADING):
        content = content.split(f"\n\n## {heading}", 1)[0]
    shown[-1]["content"] = content
    return [json.dumps(message, sort_keys=True) for message in shown]


async def test_the_prompt_stays_put_between_steps_while_a_summary_and_memory_arrive(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(
        runtimes,
        tmp_path,
        fake_openai,
        memory_enabled=True,
        memory_dense=False,
        memory_idle_seconds=0,
        memory_turns_threshold=1000,
        memory_chars_threshold=10**9,
        memory_steps_threshold=1000,
        memory_recall_items=0,
    )
    for turn in range(30):
        await say(rt, f"note {turn}: " + "words to fill the line " * 3)
        if turn == 14:
            assert rt.memory is not None
            await rt.memory.remember(session_of(rt), FACT, seq=None)
    requests = [request["messages"] for request in chat_requests(fake_openai)]
    assert len(requests) == 30

    steps = [k for k in range(1, 30) if requests[k][1] != requests[k - 1][1]]
    # Twenty messages, a step down to ten: the window moves every five or six turns, not every turn.
    assert 3 <= len(steps) <= 6, steps
    for k in range(1, 30):
        if k in steps:
            continue
        earlier, later = without_note(requests[k - 1]), without_note(requests[k])
        assert earlier[0] == later[0], f"request {k}: the system message changed between two steps"
        assert later[: len(earlier)] == earlier, f"request {k}: the earlier request is not its prefix"

    system = [request[0]["content"] for request in requests]
    notes = [request[-1]["content"] for request in requests]
    # The first summary (written after the first step) follows the history, then enters the
    # system message at the next step; each later step's summary does the same.
    arrived = next(k for k, note in enumerate(notes) if NEW_SUMMARY_HEADING in note)
    summary = notes[arrived].split(f"## {NEW_SUMMARY_HEADING}\n", 1)[1].split("\n\n## ", 1)[0]
    assert arrived > steps[0] and all(SUMMARY_HEADING not in text for text in system[:arrived])
    entered = next(k for k, text in enumerate(system) if f"## {SUMMARY_HEADING}\n{summary}" in text)
    assert entered in steps and entered > arrived
    assert all(f"## {NEW_SUMMARY_HEADING}\n{summary}" in note for note in notes[arrived:entered])
    # So does the memory item stored after turn 15.
    arrived = next(k for k, note in enumerate(notes) if f"## {NEW_MEMORY_HEADING}" in note and FACT in note)
    entered = next(k for k, text in enumerate(system) if f"## {MEMORY_HEADING}" in text and FACT in text)
    assert arrived == 15 and entered in steps and entered > arrived
    assert all(FACT not in note for note in notes[entered:])
