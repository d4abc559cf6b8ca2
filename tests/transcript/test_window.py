"""Seed 000's buildContextWindow, as `build_context` applies it with `context.window: rolling`.

System and malformed rows never count, the last `max_messages` well-formed rows are taken, the
oldest go while a cap is exceeded, and the window opens with a user message. Where the seed keeps
an oversized newest message whole or leaves nothing, Chorus keeps the newest user message, cut to
fit (tests/transcript/test_build_budget.py).
"""

from __future__ import annotations

from tests.transcript.factories import assistant, build, history, rolling, user
from transcript import TranscriptRow, count_tokens


def test_no_rows_give_the_system_message_alone() -> None:
    context = build([])
    assert history(context) == [] and context.stats.kept_seqs == ()


def test_system_rows_take_no_place_under_the_message_cap() -> None:
    rows = [user(1, "u1"), assistant(2, "a2"), user(3, "u3"), assistant(4, "a4")]
    events = [
        TranscriptRow(seq=5, role="system", kind="persona_switch", content="persona switched"),
        {"seq": 6, "role": "user"},
    ]
    assert build([*rows, *events], budget=rolling(max_messages=4)).stats.kept_seqs == (1, 2, 3, 4)


def test_the_message_cap_applies_before_the_character_cap() -> None:
    rows = [user(1, "a" * 10), assistant(2, "b" * 10), user(3, "c" * 10), assistant(4, "d" * 10)]
    # The cap of three drops row 1 (and so row 2, an assistant row opening the window): the
    # character cap, which all four rows would have fitted, has nothing left to drop.
    assert build(rows, budget=rolling(max_messages=3, max_chars=40)).stats.kept_seqs == (3, 4)


def test_each_cap_drops_the_oldest_until_both_fit() -> None:
    # Few characters but many tokens in the oldest rows; many characters in the newest.
    rows = [
        user(1, "a" * 10, token_count=60),
        assistant(2, "b" * 10, token_count=60),
        user(3, "c" * 10, token_count=1),
        assistant(4, "d" * 40, token_count=1),
        user(5, "e" * 10, token_count=1),
    ]
    budget = rolling(max_chars=80, max_tokens=400)
    assert build(rows, budget=budget).stats.kept_seqs == (1, 2, 3, 4, 5)
    assert build(rows, budget=rolling(max_chars=70, max_tokens=400)).stats.kept_seqs == (3, 4, 5)
    assert build(rows, budget=rolling(max_chars=80, max_tokens=100)).stats.kept_seqs == (3, 4, 5)


def test_rows_without_a_stored_count_are_counted_by_their_content() -> None:
    long = "hello world " * 20
    assert count_tokens(long) == 41
    rows = [user(1, long), assistant(2, long), user(3, "hi")]
    assert build(rows, budget=rolling(max_tokens=120)).stats.kept_seqs == (1, 2, 3)
    assert build(rows, budget=rolling(max_tokens=60)).stats.kept_seqs == (3,)


def test_a_window_of_assistant_rows_only_is_empty() -> None:
    assert build([assistant(1, "a1"), assistant(2, "a2")]).stats.kept_seqs == ()
