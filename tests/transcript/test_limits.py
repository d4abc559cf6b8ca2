from __future__ import annotations

import os
import subprocess
import sys

from transcript import CONTEXT_COUNT, Budget


def context_count_with(value: str | None) -> int:
    environment = {k: v for k, v in os.environ.items() if k != "CHORUS_CONTEXT_COUNT"}
    if value is not None:
        environment["CHORUS_CONTEXT_COUNT"] = value
    result = subprocess.run(
        [sys.executable, "-c", "from transcript.limits import CONTEXT_COUNT; print(CONTEXT_COUNT)"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(result.stdout)


def test_context_count_defaults_to_20() -> None:
    assert context_count_with(None) == 20


def test_context_count_is_read_from_the_environment() -> None:
    assert context_count_with("7") == 7


def test_invalid_or_nonpositive_context_count_falls_back_to_20() -> None:
    assert [context_count_with(v) for v in ("abc", "0", "-3", "")] == [20, 20, 20, 20]


def test_budget_takes_its_message_cap_from_context_count() -> None:
    assert Budget().max_messages == CONTEXT_COUNT
