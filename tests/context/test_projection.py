"""project_view, plan_collapse and plan_compaction: pure planning over stored rows."""

from __future__ import annotations

from transcript import (
    Collapse,
    Snip,
    TranscriptRow,
    keep_recent_cut,
    plan_collapse,
    plan_compaction,
    project_view,
)


def rows(count: int) -> list[TranscriptRow]:
    return [
        TranscriptRow(seq=n, role="user" if n % 2 else "assistant", content=f"m{n}", persona_id="ada")
        for n in range(1, count + 1)
    ]


def test_projection_folds_ranges_drops_snips_and_starts_at_the_oldest_fold() -> None:
    view = project_view(rows(10), collapses=[Collapse(3, 5, "folded")], snips=[Snip(8, 8)])
    assert [(row.seq, row.content) for row in view] == [
        (3, "[Earlier messages #3–#5, folded]\nfolded"),
        (6, "m6"),
        (7, "m7"),
        (9, "m9"),
        (10, "m10"),
    ]
    assert view[0].role == "user"
    assert project_view(rows(3)) == rows(3)


def test_collapse_takes_the_oldest_free_rows_and_keeps_the_recent_ones() -> None:
    stored = rows(12)
    window = [row.seq for row in stored[2:]]  # #3–#12 in the window
    chosen = plan_collapse(stored, candidates=window, max_messages=4, keep_recent=6)
    assert [row.seq for row in chosen] == [3, 4, 5, 6]
    chosen = plan_collapse(
        stored,
        candidates=window,
        collapses=[Collapse(3, 4, "x")],
        snips=[Snip(5, 5)],
        max_messages=4,
        keep_recent=6,
    )
    assert [row.seq for row in chosen] == [6]  # stops at the protected recent six (#7–#12)
    assert plan_collapse(stored, candidates=window, max_messages=4, keep_recent=12) == ()


def test_compaction_cut_never_splits_a_collapsed_range() -> None:
    stored = rows(12)
    plan = plan_compaction(stored, previous_last_seq=2, cut_seq=6, collapses=[Collapse(5, 8, "x")])
    assert plan is not None and (plan.first_seq, plan.last_seq) == (3, 4)
    assert [row.seq for row in plan.rows] == [3, 4]
    assert plan_compaction(stored, previous_last_seq=4, cut_seq=6, collapses=[Collapse(5, 8, "x")]) is None
    snipped = plan_compaction(stored, previous_last_seq=0, cut_seq=4, snips=[Snip(2, 3)])
    assert snipped is not None and [row.seq for row in snipped.rows] == [1, 4]


def test_keep_recent_cut_counts_conversation_rows_only() -> None:
    stored = [*rows(6), TranscriptRow(seq=7, role="system", kind="note", content="event")]
    assert keep_recent_cut(stored, 2) == 4
    assert keep_recent_cut(stored, 2, [Snip(6, 6)]) == 3
    assert keep_recent_cut(stored, 10) == 0
