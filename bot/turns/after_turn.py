"""Which after-turn jobs a turn's reply asks for: those that have work once it is stored.

Each job (`bot.jobs.definitions`) may say when it has work: context maintenance when
the context nears its budget or enough messages left the window unsummarised, the
memory offload when one of its triggers is reached. A turn checks that against the
state its reply leaves — the view with the reply as its newest row, and the context
the next turn would start from — and its reply enqueues only those jobs, in the
reply's own transaction. Most turns then enqueue none of them: a job that would only
find nothing to do costs its claim, its reads and a context build. A recorded group
message is checked the same way against the state it leaves, with a context that
recalls nothing (it will not be answered): where recall could change what maintenance
finds, maintenance is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.storage.context_records import ContextView
from bot.storage.jobs import JobSpec
from bot.storage.models import ChatSession
from transcript import Context


@dataclass(frozen=True)
class AfterTurn:
    """A session as a turn's reply, or a recorded message, leaves it."""

    session: ChatSession
    # The rows after the summary, oldest first, the reply (or recorded message) last: not
    # stored yet, so its seq is the lowest it can get.
    view: ContextView
    # The context built from `view`, as the next turn would start from it.
    context: Context
    # Tokens recall may add to that context that `context` leaves out: a recorded group
    # message's check searches nothing (see `TurnEngine.record`). 0: `context` holds them.
    recall_allowance: int = 0


class AfterTurnWork(Protocol):
    """What the engine asks of the after-turn jobs (`bot.jobs.JobDefinitions` answers)."""

    @property
    def after_turn(self) -> tuple[JobSpec, ...]:
        """Every job a stored turn may ask for (what a reply enqueues when its state is unknown)."""
        ...

    def with_work(self, turn: AfterTurn) -> tuple[JobSpec, ...]:
        """The jobs with work in `turn`'s state. Reads the database: call it off the event loop."""
        ...
