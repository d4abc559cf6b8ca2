"""Tool rows at a tiny CHORUS_CONTEXT_COUNT, through every lane (see tiny_context_tools.py).

The limit is read once, when `transcript.limits` is imported, so the checks run in a
process of their own whose environment sets it, as a deployment would.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

INNER = Path(__file__).with_name("tiny_context_tools.py")
ROOT = Path(__file__).resolve().parents[2]


async def test_tool_rows_stay_whole_and_lanes_agree_at_a_context_count_of_three(tmp_path: Path) -> None:
    """On SQLite and on PostgreSQL (the inner module runs once per database)."""
    environment = {**os.environ, "CHORUS_CONTEXT_COUNT": "3"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-v",
        "--basetemp",
        str(tmp_path / "inner"),
        str(INNER),
        cwd=ROOT,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=290)
    report = output.decode(errors="replace")
    assert process.returncode == 0, report
    assert " 2 passed" in report and "skipped" not in report, report
