"""The stepped window: it holds for many turns, then drops to its low-water mark in one move.

Between two steps request k's messages lead request k+1's and the system message is
byte-identical; a step happens at most once per stride of sequence numbers; a plain chat
drops to `low_water` units at each step. `low_water == max_messages` is seed 000's rolling
window, checked here against a transcription of its buildContextWindow.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from tests.transcript.factories import assistant, build, rolling, tool_call, tool_result, user
from transcript import Budget, Context, TranscriptRow, window_step_seq
from transcript.preamble import NEW_MEMORY_HEADING, NEW_SUMMARY_HEADING, RECALL_HEADING

SEEDS = range(40)
# Twenty units, a step down to ten: marks 11 seqs apart (the defaults of `context.window`).
STRIDE = 11


@dataclass
class Request:
    context: Context
    newest_seq: int

    @property
    def start(self) -> int:
        return self.context.stats.kept_seqs[0]


def random_turns(seed: int, turns: int) -> list[list[TranscriptRow]]:
    """A conversation as the rows each turn stores: a question, maybe tool exchanges and events, a reply."""
    chance = random.Random(seed)
    seq = 0

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq

    stored: list[list[TranscriptRow]] = []
    for turn in range(turns):
        rows = [user(next_seq(), f"question {turn} " + "word " * chance.randint(1, 30))]
        for exchange in range(chance.choice((0, 0, 0, 1, 2))):
            call_id = f"call-{turn}-{exchange}"
            rows.append(tool_call(next_seq(), (call_id, "recall", "{}")))
            rows.append(tool_result(next_seq(), call_id, "found " * chance.randint(1, 20)))
        if chance.random() < 0.1:
            rows.append(
                TranscriptRow(seq=next_seq(), role="system", kind="persona_switch", content="switched")
            )
        rows.append(assistant(next_seq(), f"reply {turn} " + "word " * chance.randint(1, 40)))
        stored.append(rows)
    return stored


def requests_of(turns: list[list[TranscriptRow]], budget: Budget, **options: Any) -> list[Request]:
    """One request per model call: after the question, and after each tool result."""
    rows: list[TranscriptRow] = []
    requests = []
    for turn in turns:
        for row in turn:
            rows.append(row)
            if row.role in ("user", "tool"):
                requests.append(Request(build(rows, budget=budget, **options), row.seq))
    return requests


def encoded(context: Context) -> list[str]:
    """The request's messages, the newest user message without the turn's note."""
    messages = [dict(message) for message in context.messages]
    newest_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    content = messages[newest_user]["content"]
    for heading in (NEW_SUMMARY_HEADING, NEW_MEMORY_HEADING, RECALL_HEADING):
        content = content.split(f"\n\n## {heading}", 1)[0]
    messages[newest_user]["content"] = content
    return [json.dumps(message, sort_keys=True) for message in messages]


def assert_prefix(earlier: Context, later: Context) -> None:
    before, after = encoded(earlier), encoded(later)
    assert before[0] == after[0], "the system message changed between two steps"
    assert after[: len(before)] == before, "the earlier request is not a prefix of the later one"


def steps_of(requests: list[Request]) -> list[int]:
    return [k for k in range(1, len(requests)) if requests[k].start != requests[k - 1].start]


def test_between_steps_each_request_leads_the_next_and_steps_are_a_stride_apart() -> None:
    budget = Budget(max_messages=20)
    for seed in SEEDS:
        requests = requests_of(
            random_turns(seed, 60), budget, summary="We planned a trip.", memory="Alice likes trains."
        )
        steps = set(steps_of(requests))
        for k in range(1, len(requests)):
            earlier, later = requests[k - 1], requests[k]
            if k not in steps:
                assert_prefix(earlier.context, later.context)
            else:
                assert later.start > earlier.start
        # The window starts only at marks `stride` seqs apart: a step per stride at most.
        newest = requests[-1].newest_seq
        assert steps, f"seed {seed}: the window never stepped"
        assert len(steps) <= newest // STRIDE + 1, f"seed {seed}: {len(steps)} steps"


def test_a_plain_chat_steps_down_to_the_low_water_mark() -> None:
    budget = Budget(max_messages=20, low_water=10)
    rows: list[TranscriptRow] = []
    requests = []
    for seq in range(1, 121):
        rows.append(user(seq, f"m{seq}") if seq % 2 else assistant(seq, f"m{seq}"))
        requests.append(Request(build(rows, budget=budget), seq))
    kept = [len(request.context.stats.kept_seqs) for request in requests]
    steps = steps_of(requests)
    assert steps and all(later - earlier == STRIDE for earlier, later in zip(steps, steps[1:], strict=False))
    for step in steps:
        # Down to the low-water mark; one less when the mark is a reply (a window opens with a user).
        assert kept[step] == (10 if requests[step].start % STRIDE == 1 else 9)
        assert kept[step - 1] >= 19
        assert max(kept[step : step + STRIDE]) <= 20


def test_a_token_budget_drops_in_steps_too() -> None:
    budget = Budget(max_messages=20, max_tokens=400)
    for seed in range(10):
        requests = requests_of(random_turns(seed, 50), budget)
        assert any(request.context.stats.dropped_for_budget for request in requests)
        steps = set(steps_of(requests))
        for k in range(1, len(requests)):
            if k not in steps:
                assert_prefix(requests[k - 1].context, requests[k].context)
        assert len(steps) <= requests[-1].newest_seq // STRIDE + 1


def test_what_was_stored_after_the_reply_before_a_step_waits_for_the_next_step() -> None:
    budget = Budget(max_messages=20, low_water=10)
    rows: list[TranscriptRow] = []
    periods: dict[int, set[int | None]] = {}
    for seq in range(1, 80):
        rows.append(user(seq, f"m{seq}") if seq % 2 else assistant(seq, f"m{seq}"))
        if seq % 2:
            # A request: the step's row is a reply of the current window, the same between steps.
            start = build(rows, budget=budget).stats.kept_seqs[0]
            step_row = window_step_seq(rows, budget=budget)
            assert step_row is None or (step_row % 2 == 0 and step_row >= start - 1)
            periods.setdefault(start, set()).add(step_row)
    assert len(periods) >= 5
    for start, step_rows in periods.items():
        # Before the step's reply is stored, everything stored so far is steady (None).
        assert len(step_rows - {None}) == 1, (start, step_rows)
    assert periods[1] == {None, 2}
    assert window_step_seq(rows, budget=rolling(max_messages=20)) is None

    context = build(
        rows, budget=budget, summary="old summary", new_summary="new summary", new_memory="- item"
    )
    assert "new summary" not in context.messages[0]["content"]
    assert "old summary" in context.messages[0]["content"]
    note = context.messages[-1]["content"]
    assert note.startswith("m79\n\n## " + NEW_SUMMARY_HEADING) and NEW_MEMORY_HEADING in note


def seed_000_window(rows: list[TranscriptRow], max_messages: int, max_chars: int) -> tuple[int, ...]:
    """Seed 000's buildContextWindow, step by step: last N, drop oldest over the cap, open with a user."""
    windowed = [row for row in rows if row.role != "system"][-max_messages:]
    chars = sum(len(row.content) for row in windowed)
    while len(windowed) > 1 and chars > max_chars:
        chars -= len(windowed.pop(0).content)
    while windowed and windowed[0].role != "user":
        windowed.pop(0)
    return tuple(row.seq for row in windowed)


def test_the_rolling_setting_is_seed_000s_window() -> None:
    for seed in SEEDS:
        chance = random.Random(seed)
        rows: list[TranscriptRow] = []
        for seq in range(1, chance.randint(2, 80)):
            text = "x" * chance.randint(1, 60)
            rows.append(user(seq, text) if chance.random() < 0.55 else assistant(seq, text))
        rows.append(user(len(rows) + 1, "the question"))
        size, cap = chance.randint(1, 30), chance.randint(60, 800)
        kept = build(rows, budget=rolling(max_messages=size, max_chars=cap)).stats.kept_seqs
        assert kept == seed_000_window(rows, size, cap), f"seed {seed}"
