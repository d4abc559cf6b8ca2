"""The summarisation chain: progressive, staged, the fallbacks and the retry cap."""

from __future__ import annotations

import logging

from transcript import (
    SummaryItem,
    SummaryRun,
    extract_identifiers,
    summarise_in_stages,
    summarise_with_fallback,
)
from transcript.context import Message


def items(*lines: str, tokens: int = 10) -> list[SummaryItem]:
    return [
        SummaryItem(seq=i, line=f"#{i} Alice (user): {line}", tokens=tokens)
        for i, line in enumerate(lines, 1)
    ]


class Recorder:
    """A summariser that answers from a list (an exception is raised, not returned)."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[list[Message]] = []

    async def __call__(self, messages: list[Message]) -> str:
        self.requests.append(messages)
        answer = self.answers.pop(0) if self.answers else "summary"
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_each_chunk_updates_the_previous_summary() -> None:
    summariser = Recorder("first", "second")
    run = SummaryRun(summariser)
    text = await summarise_with_fallback(
        run, items("a", "b", "c"), chunk_tokens=24, context_window=4000, previous="earlier"
    )
    assert text == "second"
    assert len(summariser.requests) == 2  # 24 / 1.2 = 20 tokens: two items per chunk
    assert "Summary so far:\nearlier" in summariser.requests[0][-1]["content"]
    assert "Summary so far:\nfirst" in summariser.requests[1][-1]["content"]
    assert "#3 Alice (user): c" in summariser.requests[1][-1]["content"]


async def test_a_failing_summariser_ends_in_a_statement_that_keeps_identifiers() -> None:
    summariser = Recorder(*[RuntimeError("down")] * 10)
    run = SummaryRun(summariser, attempts=2)
    text = await summarise_with_fallback(
        run,
        items("see https://example.org/a?b=1 and /srv/app/config.yaml", "ticket OPS-4512 for 1,250.00"),
        chunk_tokens=1000,
        context_window=4000,
        previous="Earlier: Bob chose Postgres.",
    )
    assert text.startswith(
        "Earlier: Bob chose Postgres.\n\n[Messages #1–#2 (2 messages) could not be summarised"
    )
    for identifier in ("https://example.org/a?b=1", "/srv/app/config.yaml", "OPS-4512", "1,250.00"):
        assert identifier in text
    assert run.calls == 2 and run.failures == 2
    assert run.fallbacks == ["plain statement"]


async def test_an_empty_answer_counts_as_a_failure_and_is_retried() -> None:
    run = SummaryRun(Recorder("   ", "kept"), attempts=2)
    text = await summarise_with_fallback(run, items("x"), chunk_tokens=1000, context_window=4000)
    assert text == "kept"
    assert (run.calls, run.failures) == (2, 1)


async def test_summariser_returning_nothing_never_gives_an_empty_summary() -> None:
    run = SummaryRun(Recorder(*[""] * 10), attempts=3)
    text = await summarise_with_fallback(run, items("hello"), chunk_tokens=1000, context_window=4000)
    assert text.startswith("[Messages #1–#1 (1 messages) could not be summarised")
    assert run.calls == 3


async def test_oversized_messages_are_left_out_with_a_note_when_the_full_summary_fails() -> None:
    huge = SummaryItem(seq=2, line="#2 Bob (user): " + "log " * 5000, tokens=5000)
    small = [
        SummaryItem(seq=1, line="#1 Alice (user): hi", tokens=5),
        SummaryItem(3, "#3 Alice (user): ok", 5),
    ]
    # First pass: the chunk with the huge message fails twice; then the small ones succeed.
    summariser = Recorder(RuntimeError("too big"), RuntimeError("too big"), "small summary")
    run = SummaryRun(summariser, attempts=2)
    text = await summarise_with_fallback(
        run, [small[0], huge, small[1]], chunk_tokens=1000, context_window=4000
    )
    assert text.startswith("small summary\n\n[#2: a very large message (~6K tokens) was left out")
    assert run.fallbacks == ["left out oversized messages"]


async def test_the_call_cap_stops_retrying() -> None:
    summariser = Recorder(*[RuntimeError("down")] * 50)
    run = SummaryRun(summariser, attempts=5, max_calls=3)
    await summarise_with_fallback(run, items(*"abcdef"), chunk_tokens=24, context_window=4000)
    assert run.calls == 3 and len(summariser.requests) == 3


async def test_stages_are_summarised_apart_then_merged_with_the_previous_summary() -> None:
    summariser = Recorder("stage one", "stage two", "merged")
    run = SummaryRun(summariser)
    text = await summarise_in_stages(
        run, items(*"abcd", tokens=40), chunk_tokens=100, context_window=4000, previous="before"
    )
    assert text == "merged"
    merge = summariser.requests[2][-1]["content"]
    assert "Summary so far:\nbefore" in merge
    assert "Partial summary 1:\nstage one" in merge and "Partial summary 2:\nstage two" in merge
    assert "Summary so far" not in summariser.requests[0][-1]["content"]


async def test_a_failed_merge_keeps_the_stage_summaries_side_by_side() -> None:
    summariser = Recorder("stage one", "stage two", RuntimeError("x"), RuntimeError("x"))
    run = SummaryRun(summariser)
    text = await summarise_in_stages(
        run, items(*"abcd", tokens=40), chunk_tokens=100, context_window=4000, previous="before"
    )
    assert text == "before\n\nstage one\n\nstage two"


async def test_focus_and_neutrality_are_in_the_prompt() -> None:
    summariser = Recorder("s")
    await summarise_with_fallback(
        SummaryRun(summariser), items("x"), chunk_tokens=1000, context_window=4000, focus="the budget"
    )
    system = summariser.requests[0][0]["content"]
    assert "focus on: the budget" in system
    assert "not any of the personas" in system
    assert "URLs, ids, file paths" in system


def test_identifiers_are_found_once_in_order() -> None:
    found = extract_identifiers(
        ["Open https://x.io/a, then ~/notes/todo.md", "again https://x.io/a; id user_42"]
    )
    assert found == ["https://x.io/a", "~/notes/todo.md", "user_42"]


async def test_an_exception_from_the_summariser_is_logged_with_its_traceback(caplog) -> None:
    run = SummaryRun(Recorder(RuntimeError("model down"), "kept"), attempts=2)
    with caplog.at_level(logging.WARNING, logger="transcript.compaction"):
        assert await run.call([{"role": "user", "content": "x"}]) == "kept"
    failed = [record for record in caplog.records if record.name == "transcript.compaction"]
    assert len(failed) == 1
    assert failed[0].exc_info is not None and str(failed[0].exc_info[1]) == "model down"
