"""Which after-turn jobs a turn's reply asks for: those that have work once it is stored.

Each job (`bot.jobs.definitions`) may say when it has work: context maintenance when
the context nears its budget or enough messages left the window unsummarised, the
memory offload when one of its triggers is reached. A turn checks that against the
state its reply leaves — the view with the reply as its newest row, and the context
the next turn would start from — and its reply enqueues only those jobs, in the
reply's own transaction. Most turns then enqueue none of them: a job that would only
find nothing to do costs its claim, its reads and a context build.
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
    """A session as a turn's reply leaves it."""

    session: ChatSession
    # The rows after the summary, oldest first, the reply last (not stored yet, so its
    # seq is the lowest it can get).
    view: ContextView
    # The context built from `view`, as the next turn would start from it.
    context: Context


class AfterTurnWork(Protocol):
    """What the engine asks of the after-turn jobs (`bot.jobs.JobDefinitions` answers)."""

    @property
    def after_turn(self) -> tuple[JobSpec, ...]:
        """Every job a stored turn may ask for (what a reply enqueues when its state is unknown)."""
        ...

    def with_work(self, turn: AfterTurn) -> tuple[JobSpec, ...]:
        """The jobs with work in `turn`'s state. Reads the database: call it off the event loop."""
        ...
