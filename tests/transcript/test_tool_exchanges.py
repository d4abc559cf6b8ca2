"""Tool calls and results in the transcript: the API's shape, and no window or cut ever splits a pair."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.transcript.factories import assistant, build, history, image, tool_call, tool_result, user
from transcript import (
    Budget,
    Capabilities,
    Collapse,
    Snip,
    TranscriptRow,
    TurnMemo,
    exchange_spans,
    keep_recent_cut,
    plan_collapse,
    plan_compaction,
    project_view,
    units_of,
)


def test_an_exchange_is_rebuilt_in_the_api_shape() -> None:
    rows = [
        user(1, "What did I say about the dentist?", sender_name="Grace"),
        tool_call(
            2, ("c1", "recall", '{"query":"dentist"}'), ("c2", "context_inspect", "{}"), text="Let me look."
        ),
        tool_result(3, "c1", '{"hits":[]}'),
        tool_result(4, "c2", "no such thing", name="context_inspect", status="failed"),
        assistant(5, "You said Friday."),
    ]

    messages = history(build(rows))

    assert messages == [
        {"role": "user", "content": "What did I say about the dentist?", "name": "Grace"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "name": "sage",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "c1",
                    "function": {"name": "recall", "arguments": '{"query":"dentist"}'},
                },
                {"type": "function", "id": "c2", "function": {"name": "context_inspect", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"hits":[]}'},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no such thing"},
        {"role": "assistant", "content": "You said Friday.", "name": "sage"},
    ]


def test_a_call_without_words_has_no_content_and_a_missing_result_is_said() -> None:
    rows = [
        user(1, "hi"),
        tool_call(2, ("c1", "recall", "{}"), ("c2", "recall", "{}")),
        tool_result(3, "c2", "ok"),
    ]

    messages = history(build(rows))

    assert messages[1]["content"] is None
    assert [(m["tool_call_id"], m["content"]) for m in messages[2:]] == [
        ("c1", "Error: No result was stored for this call: the turn ended before the tool finished."),
        ("c2", "ok"),
    ]


def test_a_result_without_its_call_never_reaches_the_model() -> None:
    rows = [tool_result(1, "c0", "orphan"), user(2, "hi"), tool_result(3, "c9", "stray")]

    assert [m["role"] for m in history(build(rows))] == ["user"]


def test_a_long_result_enters_trimmed_head_and_tail() -> None:
    result = "BEGIN " + "filler " * 3000 + " END"
    rows = [user(1, "read it"), tool_call(2, ("c1", "fetch", "{}")), tool_result(3, "c1", result)]

    content = history(build(rows, budget=Budget(tool_result_tokens=100)))[2]["content"]

    assert content.startswith("BEGIN") and content.endswith("END")
    assert "characters cut" in content
    assert len(content) < 1000


def test_a_model_without_tools_reads_an_exchange_as_text() -> None:
    rows = [
        user(1, "time?"),
        tool_call(2, ("c1", "time__now", "{}"), text="Checking."),
        tool_result(3, "c1", "09:00"),
    ]

    messages = history(build(rows, capabilities=Capabilities(tools=False)))

    assert messages[1] == {
        "role": "assistant",
        "content": "Checking.\n[time__now {} → 09:00]",
        "name": "sage",
    }
    assert all("tool_calls" not in m and m["role"] != "tool" for m in messages)


def test_images_a_tool_returned_follow_the_exchange_for_a_vision_model() -> None:
    shot = image("screen.png", data_url="data:image/png;base64,AAAA")
    rows = [
        user(1, "look"),
        tool_call(2, ("c1", "browser__shot", "{}")),
        tool_result(3, "c1", "done", attachments=(shot,)),
    ]

    seeing = history(build(rows, capabilities=Capabilities(vision=True)))
    blind = history(build(rows))

    assert [m["role"] for m in seeing] == ["user", "assistant", "tool", "user"]
    assert seeing[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
    }
    assert [m["role"] for m in blind] == ["user", "assistant", "tool"]
    assert "[image: screen.png" in blind[2]["content"]


def test_an_exchange_counts_once_against_the_message_count() -> None:
    rows = [
        user(1, "a"),
        assistant(2, "b"),
        user(3, "c"),
        tool_call(4, ("c1", "recall", "{}")),
        tool_result(5, "c1", "r"),
    ]

    kept = build(rows, budget=Budget(max_messages=3)).stats.kept_seqs

    assert kept == (3, 4, 5)


def test_the_question_stays_when_its_own_tool_rounds_exceed_the_count() -> None:
    rows: list[TranscriptRow] = [user(1, "old"), user(2, "the question")]
    for step in range(6):
        rows += [
            tool_call(3 + 2 * step, (f"c{step}", "recall", "{}")),
            tool_result(4 + 2 * step, f"c{step}", f"r{step}"),
        ]

    kept = build(rows, budget=Budget(max_messages=3)).stats.kept_seqs

    assert kept == (2, 11, 12, 13, 14)


def _random_conversation(rng: random.Random, turns: int) -> list[TranscriptRow]:
    rows: list[TranscriptRow] = []
    seq = 0

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq

    for turn in range(turns):
        rows.append(user(next_seq(), f"question {turn} " + "word " * rng.randint(1, 60)))
        for step in range(rng.choice([0, 0, 1, 2, 5])):
            calls = [
                (f"t{turn}s{step}c{n}", rng.choice(["recall", "fetch"]), '{"q": "x"}')
                for n in range(rng.randint(1, 3))
            ]
            rows.append(tool_call(next_seq(), *calls, text=rng.choice(["", "Let me see."])))
            answered = calls if rng.random() > 0.1 else calls[:-1]  # sometimes a turn died mid-round
            for call_id, name, _ in answered:
                rows.append(tool_result(next_seq(), call_id, "result " * rng.randint(1, 400), name=name))
        if rng.random() > 0.2:
            rows.append(assistant(next_seq(), "answer " + "word " * rng.randint(1, 80)))
    return rows


def assert_whole_pairs(messages: list[dict[str, Any]]) -> None:
    """Every call answered once right after it, every result right after its call, user first."""
    body = messages[1:]
    assert body, "no message at all"
    assert body[0]["role"] == "user"
    index = 0
    while index < len(body):
        message = body[index]
        index += 1
        assert message["role"] != "tool", f"a tool message without its call: {message}"
        calls = [call["id"] for call in message.get("tool_calls", [])]
        answered = []
        while index < len(body) and body[index]["role"] == "tool":
            answered.append(body[index]["tool_call_id"])
            index += 1
        assert answered == calls, f"calls {calls} answered by {answered}"
        # A vision model's images of the exchange may follow as a user message.


@pytest.mark.parametrize("seed", range(40))
def test_no_window_splits_an_exchange_at_tiny_counts_and_budgets(seed: int) -> None:
    rng = random.Random(seed)
    rows = _random_conversation(rng, rng.randint(1, 12))
    question = max(row.seq for row in rows if row.role == "user")
    for max_messages in (1, 2, 3, 5, 20):
        for max_tokens in (None, 120, 300, 800, 3000):
            budget = Budget(max_messages=max_messages, max_tokens=max_tokens, tool_result_tokens=80)
            context = build(rows, budget=budget)
            assert_whole_pairs(context.messages)
            assert question in context.stats.kept_seqs, "the turn's question was lost"
            if max_tokens is not None and context.stats.total_tokens > max_tokens:
                # Over budget only when nothing is left to drop: the question and the newest unit.
                units = units_of([row for row in rows if row.seq in context.stats.kept_seqs])
                assert len(units) <= 2, f"over budget with {len(units)} units kept"
            again = build(list(rows), budget=budget)
            assert json.dumps(again.messages) == json.dumps(context.messages)


@pytest.mark.parametrize("seed", range(40))
def test_snips_collapses_and_compaction_cuts_snap_to_whole_exchanges(seed: int) -> None:
    rng = random.Random(1000 + seed)
    rows = _random_conversation(rng, rng.randint(2, 10))
    last = rows[-1].seq
    first, second = sorted(rng.sample(range(1, last + 1), 2)) if last > 1 else (1, 1)
    view = project_view(rows, snips=[Snip(first, second)])
    assert_whole_pairs(build(view).messages) if any(r.role == "user" for r in view) else None
    snipped = {row.seq for row in rows} - {row.seq for row in view}
    for row in rows:
        if row.tool_calls and row.seq in snipped:
            answers = {
                r.seq for r in rows if r.role == "tool" and r.tool_call_id in {c.id for c in row.tool_calls}
            }
            assert answers <= snipped, "a snip kept results of a snipped call"

    chosen = plan_collapse(
        rows, candidates=[row.seq for row in rows], max_messages=rng.randint(1, 6), keep_recent=2
    )
    if chosen:
        collapse = Collapse(chosen[0].seq, chosen[-1].seq, "folded")
        folded = project_view(rows, collapses=[collapse])
        inside = {row.seq for row in rows if collapse.first_seq <= row.seq <= collapse.last_seq}
        for row in rows:
            if row.tool_calls and row.seq in inside:
                answers = {
                    r.seq
                    for r in rows
                    if r.role == "tool" and r.tool_call_id in {c.id for c in row.tool_calls}
                }
                assert answers <= inside, "a collapse split an exchange"
        if any(r.role == "user" for r in folded):
            assert_whole_pairs(build(folded).messages)

    spans = exchange_spans(rows)
    for cut in [keep_recent_cut(rows, rng.randint(0, 4)), rng.randint(1, last)]:
        plan = plan_compaction(rows, previous_last_seq=0, cut_seq=cut)
        if plan is not None:
            assert not any(first <= plan.last_seq < end for first, end in spans), (
                "a compaction cut split an exchange"
            )


def test_the_builds_of_one_turn_share_a_memo_of_converted_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool round builds the context again from the same rows and those it stored: with
    a memo each row is converted once, and every build is the build without one."""
    import transcript.turns

    converted: list[int] = []
    convert = transcript.turns.turn_of

    def counting(row: Any, group: bool) -> Any:
        converted.append(row["seq"] if isinstance(row, dict) else row.seq)
        return convert(row, group)

    monkeypatch.setattr(transcript.turns, "turn_of", counting)
    rows: list[Any] = [user(1, "What time is it in Lima and in Oslo?", sender_name="Grace")]
    memo = TurnMemo()
    for round_ in range(4):
        seq = len(rows) + 1
        rows += [
            tool_call(seq, (f"c{round_}", "clock", '{"city":"Lima"}')),
            tool_result(seq + 1, f"c{round_}", "9:00"),
        ]
        budget = Budget(max_messages=3)
        remembered = build(rows, budget=budget, group=True, memo=memo)
        converted_with_memo = len(converted)
        assert remembered.messages == build(rows, budget=budget, group=True).messages
        converted = converted[:converted_with_memo]
    assert sorted(converted) == [row.seq for row in rows]
    # A row of another shape (a mapping may change) is converted on every build.
    mapping = {"seq": 99, "role": "user", "content": "hi"}
    build([mapping], memo=memo)
    build([mapping], memo=memo)
    assert converted.count(99) == 2
