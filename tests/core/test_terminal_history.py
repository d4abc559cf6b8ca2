"""The terminal's history file stays bounded: older lines are dropped when a chat starts."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.history import FileHistory

from channels.terminal.editor import HISTORY_ENTRIES, history_file


def test_a_long_history_file_keeps_its_newest_lines_and_stays_private(tmp_path: Path) -> None:
    path = tmp_path / "history"
    written = FileHistory(str(path))
    for number in range(HISTORY_ENTRIES + 500):
        written.store_string(f"line {number}" if number % 7 else f"line {number}\nits second row")

    loaded = list(history_file(path).load_history_strings())

    assert len(loaded) == HISTORY_ENTRIES
    assert loaded[0] == f"line {HISTORY_ENTRIES + 499}"
    assert loaded[-1] == "line 500"
    assert "line 504\nits second row" in loaded
    # The file itself was cut, and a later start reads the same lines from it.
    assert list(FileHistory(str(path)).load_history_strings()) == loaded
    assert path.stat().st_mode & 0o777 == 0o600
