"""Seed 000's buildContextWindow semantics, one behaviour per test."""

from __future__ import annotations

from typing import Any

import pytest

from transcript import RowLike, TranscriptRow, window


def m(role: Any, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content}


def contents(rows: list[Any]) -> list[str]:
    return [row["content"] if isinstance(row, dict) else row.content for row in rows]


def test_empty_input_gives_empty_window() -> None:
    assert window([], max_messages=40) == []


def test_system_rows_are_stripped() -> None:
    rows = [m("system", "be evil"), m("user", "hi"), m("system", "x"), m("assistant", "hello")]
    assert contents(window(rows, max_messages=40)) == ["hi", "hello"]


def test_malformed_rows_are_dropped() -> None:
    rows = [m(None, "a"), m("user", None), m("user", 5), {"content": "no role"}, m("user", "ok")]
    assert contents(window(rows, max_messages=40)) == ["ok"]


def test_keeps_the_last_max_messages() -> None:
    rows = [m("user" if i % 2 == 0 else "assistant", str(i)) for i in range(10)]
    assert contents(window(rows, max_messages=4)) == ["6", "7", "8", "9"]


def test_char_cap_drops_the_oldest_first() -> None:
    rows = [m("user", "a" * 10), m("assistant", "b" * 10), m("user", "c" * 10)]
    assert contents(window(rows, max_messages=40, max_chars=20)) == ["c" * 10]
    assert contents(window(rows, max_messages=40, max_chars=30)) == [
        "a" * 10,
        "b" * 10,
        "c" * 10,
    ]


def test_char_cap_keeps_one_row_even_when_it_alone_is_over() -> None:
    rows = [m("user", "short"), m("user", "x" * 500)]
    assert contents(window(rows, max_messages=40, max_chars=100)) == ["x" * 500]


def test_token_cap_drops_the_oldest_using_stored_counts() -> None:
    rows = [
        TranscriptRow(seq=1, role="user", content="a", token_count=50),
        TranscriptRow(seq=2, role="assistant", content="b", token_count=50),
        TranscriptRow(seq=3, role="user", content="c", token_count=50),
    ]
    assert [r.seq for r in window(rows, max_messages=40, max_tokens=100)] == [3]
    assert [r.seq for r in window(rows, max_messages=40, max_tokens=150)] == [1, 2, 3]


def test_token_cap_counts_content_when_no_count_is_stored() -> None:
    rows = [m("user", "hello world"), m("assistant", "hello world"), m("user", "hello world")]
    assert len(window(rows, max_messages=40, max_tokens=4)) == 1
    assert len(window(rows, max_messages=40, max_tokens=6)) == 3


def test_leading_assistant_rows_are_trimmed() -> None:
    rows = [m("assistant", "a1"), m("assistant", "a2"), m("user", "u"), m("assistant", "a3")]
    assert contents(window(rows, max_messages=40)) == ["u", "a3"]


def test_trimming_may_leave_nothing() -> None:
    rows = [m("user", "x" * 50), m("assistant", "y" * 50)]
    assert window(rows, max_messages=40, max_chars=60) == []


def test_mappings_and_rows_are_both_accepted_and_returned_as_is() -> None:
    mapping = m("user", "from a mapping")
    row = TranscriptRow(seq=2, role="assistant", content="from a row")
    rows: list[RowLike] = [mapping, row]
    kept = window(rows, max_messages=40)
    assert kept[0] is mapping
    assert kept[1] is row


def test_max_messages_must_be_positive() -> None:
    with pytest.raises(ValueError):
        window([m("user", "hi")], max_messages=0)
