"""A tool round reuses its view only while this process changed none of the session's records."""

from __future__ import annotations

import pytest

from bot.storage.context_records import RecordChanges


def test_a_change_moves_the_sessions_tick_and_no_other() -> None:
    changes = RecordChanges()
    before_a, before_b = changes.of("a"), changes.of("b")
    changes.changed("a")
    assert changes.of("a") != before_a
    assert changes.of("b") == before_b


def test_a_forgotten_session_never_reads_as_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RecordChanges, "MAX_SESSIONS", 2)
    changes = RecordChanges()
    read_before_its_change = changes.of("a")
    changes.changed("a")
    changes.changed("b")
    changes.changed("c")  # "a" is forgotten here
    assert changes.of("a") != read_before_its_change
    assert changes.of("b") != read_before_its_change
