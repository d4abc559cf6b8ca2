"""Snips: messages left out of what the model sees, for `/snip` and the `snip` tool alike.

A snip never splits a tool exchange: its edges are widened to the whole exchange, so
the model never gets a call without its results. The messages stay stored; undoing
a snip brings them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.context.maintenance import ContextMaintainer
from bot.errors import SnipRangeError
from bot.storage.models import ChatSession
from transcript import Snip, exchange_spans, widen

# Rows an exchange may span at most (one call round's parallel calls): a snip's edges are
# widened within this many rows around it.
EXCHANGE_REACH = 64


@dataclass(frozen=True)
class Snipped:
    first_seq: int
    last_seq: int
    # When a summary already covers part of the range: the last seq it covers (it keeps them).
    summarised_up_to: int | None


async def snip(maintainer: ContextMaintainer, session: ChatSession, first: int, last: int) -> Snipped:
    """Leave messages #first..#last (widened to whole exchanges) out of the model's context."""
    if first < 1 or last < first or last > session.last_seq:
        raise SnipRangeError(
            f"This conversation has messages #1–#{session.last_seq}; #{first}–#{last} is not a range of them."
        )
    rows = await maintainer.db.run(
        maintainer.messages.rows_between,
        session.id,
        max(1, first - EXCHANGE_REACH),
        min(session.last_seq, last + EXCHANGE_REACH),
    )
    first, last = widen(first, last, exchange_spans(rows))
    await maintainer.db.run(maintainer.records.add_snip, session.id, first, last)
    summary = await maintainer.db.run(maintainer.records.latest_summary, session.id)
    covered = summary.last_seq if summary is not None and first <= summary.last_seq else None
    return Snipped(first, last, covered)


async def unsnip(
    maintainer: ContextMaintainer,
    session: ChatSession,
    *,
    every: bool = False,
    overlapping: tuple[int, int] | None = None,
) -> Sequence[Snip]:
    """Undo the newest snip, every snip, or the snips touching a range; what was undone."""
    undone = await maintainer.db.run(
        maintainer.records.undo_snips, session.id, every=every, overlapping=overlapping
    )
    return [Snip(record.first_seq, record.last_seq) for record in undone]
