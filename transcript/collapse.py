"""Context collapse and snips (docs/ARCHITECTURE.md §6): what the model sees of the stored rows.

A collapse folds a range of messages into a short summary; `project_view`
replaces each collapsed range by one note carrying that summary and leaves out
snipped messages. Stored rows are never changed: the projection is computed
again for every turn from the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transcript.exchanges import exchange_spans, units_of, widen
from transcript.rows import TranscriptRow
from transcript.tokens import count_tokens

COLLAPSE_INSTRUCTIONS = """\
Fold the messages below into a very short note (two to four lines) that replaces them \
in the conversation. Keep decisions, open requests, constraints and exact identifiers \
(URLs, ids, paths, numbers) verbatim, and say who said what (people by name, the \
assistant by persona). Stay neutral; output only the note."""


@dataclass(frozen=True)
class Collapse:
    """Messages `first_seq`..`last_seq` are shown as `summary`."""

    first_seq: int
    last_seq: int
    summary: str


@dataclass(frozen=True)
class Snip:
    """Messages `first_seq`..`last_seq` are left out of the model's context."""

    first_seq: int
    last_seq: int


def is_snipped(seq: int, snips: Sequence[Snip]) -> bool:
    return any(snip.first_seq <= seq <= snip.last_seq for snip in snips)


def collapsed_note(collapse: Collapse) -> str:
    return f"[Earlier messages #{collapse.first_seq}–#{collapse.last_seq}, folded]\n{collapse.summary}"


def collapsed_row(collapse: Collapse) -> TranscriptRow:
    """The note standing in for a collapsed range; it carries the range's first seq."""
    note = collapsed_note(collapse)
    return TranscriptRow(seq=collapse.first_seq, role="user", content=note, token_count=count_tokens(note))


def project_view(
    rows: Sequence[TranscriptRow],
    *,
    collapses: Sequence[Collapse] = (),
    snips: Sequence[Snip] = (),
) -> list[TranscriptRow]:
    """The rows as the model sees them: snipped rows out, each collapsed range as one note.

    The view starts at the oldest collapsed range: the rows before it had
    already left the window when it was folded (compaction takes them into the
    summary), so folding never pulls older rows back into the window. A snip that
    touches a tool exchange leaves out the whole exchange.
    """
    spans = exchange_spans(rows)
    snips = [Snip(*widen(snip.first_seq, snip.last_seq, spans)) for snip in snips]
    ordered = sorted(collapses, key=lambda collapse: collapse.first_seq)
    if ordered:
        rows = [row for row in rows if row.seq >= ordered[0].first_seq]
    view: list[TranscriptRow] = []
    emitted: set[int] = set()
    for row in rows:
        covering = _covering(row.seq, ordered)
        if covering is None:
            if not is_snipped(row.seq, snips):
                view.append(row)
        elif covering.first_seq not in emitted:
            emitted.add(covering.first_seq)
            view.append(collapsed_row(covering))
    return view


def _covering(seq: int, collapses: Sequence[Collapse]) -> Collapse | None:
    for collapse in collapses:
        if collapse.first_seq <= seq <= collapse.last_seq:
            return collapse
    return None


def plan_collapse(
    rows: Sequence[TranscriptRow],
    *,
    candidates: Sequence[int],
    collapses: Sequence[Collapse] = (),
    snips: Sequence[Snip] = (),
    max_messages: int,
    keep_recent: int,
) -> tuple[TranscriptRow, ...]:
    """The oldest range of conversation rows to fold next, or () when none can be.

    `candidates` are the seqs eligible (usually the rows now in the window);
    the newest `keep_recent` units (messages, or whole tool exchanges) stay
    verbatim. The range is contiguous among stored rows, stops before any
    collapsed range, holds at most `max_messages` units and never splits an
    exchange; snipped rows inside it are skipped.
    """
    eligible = set(candidates)
    units = [unit for unit in units_of(rows) if not is_snipped(unit[0].seq, snips)]
    protected = (
        {row.seq for unit in units[len(units) - keep_recent :] for row in unit} if keep_recent > 0 else set()
    )
    chosen: list[TranscriptRow] = []
    taken = 0
    for unit in units:
        free = all(
            row.seq in eligible and row.seq not in protected and _covering(row.seq, collapses) is None
            for row in unit
        )
        if free and any(row.content.strip() or row.attachments or row.tool_calls for row in unit):
            chosen.extend(unit)
            taken += 1
            if taken >= max_messages:
                break
        elif chosen:
            break
    return tuple(chosen)
