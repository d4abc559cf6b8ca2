from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_with_context_count(value: str | None, code: str) -> str:
    """What `code` prints in a fresh process whose environment sets CHORUS_CONTEXT_COUNT to `value`."""
    environment = {k: v for k, v in os.environ.items() if k != "CHORUS_CONTEXT_COUNT"}
    if value is not None:
        environment["CHORUS_CONTEXT_COUNT"] = value
    result = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True, cwd=ROOT
    )
    return result.stdout.strip()


def context_count_with(value: str | None) -> int:
    return int(
        run_with_context_count(value, "from transcript.limits import CONTEXT_COUNT; print(CONTEXT_COUNT)")
    )


def test_context_count_defaults_to_20() -> None:
    assert context_count_with(None) == 20


def test_context_count_is_read_from_the_environment() -> None:
    assert context_count_with("7") == 7


def test_invalid_or_nonpositive_context_count_falls_back_to_20() -> None:
    assert [context_count_with(v) for v in ("abc", "0", "-3", "")] == [20, 20, 20, 20]


# Five turns on the offline demo model, then the context the engine builds from their ten rows.
TURN_CONTEXT = """
import asyncio, tempfile
from pathlib import Path
from transcript import Budget
from tests.support.runtime import inbound, make_runtime

async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        runtime = make_runtime(Path(folder))
        for n in range(5):
            reply = await runtime.engine.respond(inbound(f"question {n}"))
        session = runtime.stores.sessions.find_session(reply.session_id)
        persona = runtime.engine.personas.default
        context = await runtime.engine.assembler.assemble(session, persona)
        print(Budget().max_messages, len(context.stats.kept_seqs))
        await runtime.aclose()

asyncio.run(main())
"""


def test_a_turn_brings_in_at_most_context_count_stored_messages() -> None:
    # A budget built without a cap, and the window of a real turn, both follow the environment.
    assert run_with_context_count("4", TURN_CONTEXT) == "4 4"
    assert run_with_context_count(None, TURN_CONTEXT) == "20 10"
