"""Token share, chunking and the adaptive ratio (docs/ARCHITECTURE.md §6), with their edge cases."""

from __future__ import annotations

from transcript import (
    SummaryItem,
    adaptive_chunk_ratio,
    chunk_by_max_tokens,
    split_by_token_share,
    summary_items,
)
from transcript.compaction import BASE_CHUNK_RATIO, MIN_CHUNK_RATIO
from transcript.rows import TranscriptRow


def items(*tokens: int) -> list[SummaryItem]:
    return [SummaryItem(seq=i, line=f"#{i}", tokens=t) for i, t in enumerate(tokens, start=1)]


def seqs(chunks: list[list[SummaryItem]]) -> list[list[int]]:
    return [[item.seq for item in chunk] for chunk in chunks]


def test_empty_input_gives_no_chunks_and_the_base_ratio() -> None:
    assert split_by_token_share([], 3) == []
    assert chunk_by_max_tokens([], 100) == []
    assert adaptive_chunk_ratio([], 4000) == BASE_CHUNK_RATIO


def test_share_split_balances_tokens_and_never_makes_more_parts_than_items() -> None:
    assert seqs(split_by_token_share(items(10, 10, 10, 10), 2)) == [[1, 2], [3, 4]]
    assert seqs(split_by_token_share(items(10, 10), 5)) == [[1], [2]]
    assert seqs(split_by_token_share(items(10, 10, 10), 1)) == [[1, 2, 3]]


def test_one_huge_message_gets_a_chunk_of_its_own() -> None:
    # 120 / 1.2 safety margin = 100 tokens per chunk at most.
    chunks = chunk_by_max_tokens(items(30, 30, 500, 30), 120)
    assert seqs(chunks) == [[1, 2], [3], [4]]


def test_a_single_huge_message_alone_is_one_chunk() -> None:
    assert seqs(chunk_by_max_tokens(items(10_000), 120)) == [[1]]


def test_many_tiny_messages_fill_chunks_up_to_the_margin() -> None:
    chunks = chunk_by_max_tokens(items(*([5] * 100)), 120)
    assert [len(chunk) for chunk in chunks] == [20, 20, 20, 20, 20]
    assert all(sum(item.tokens for item in chunk) <= 100 for chunk in chunks)


def test_ratio_shrinks_for_large_messages_but_not_below_the_minimum() -> None:
    assert adaptive_chunk_ratio(items(*([5] * 50)), 4000) == BASE_CHUNK_RATIO
    medium = adaptive_chunk_ratio(items(400, 400), 4000)  # 12 % of the window each, with margin
    assert round(medium, 4) == 0.16  # 0.4 − 2 × 0.12
    assert round(adaptive_chunk_ratio(items(10_000), 4000), 6) == MIN_CHUNK_RATIO


def test_items_name_every_speaker_and_skip_events() -> None:
    rows = [
        TranscriptRow(seq=1, role="user", content="Deploy to /srv/app", sender_name="Alice"),
        TranscriptRow(seq=2, role="system", kind="persona_switch", content="persona switched"),
        TranscriptRow(seq=3, role="assistant", content="Done.", persona_id="ada", sender_name="Ada"),
        TranscriptRow(seq=4, role="assistant", content="", persona_id="ada"),
    ]
    lines = [item.line for item in summary_items(rows)]
    assert lines == ["#1 Alice (user): Deploy to /srv/app", "#3 Ada (assistant, persona ada): Done."]
