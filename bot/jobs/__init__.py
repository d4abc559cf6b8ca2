"""After-turn work as durable jobs (docs/ARCHITECTURE.md §9).

`definitions` names the jobs and what each does; `runner` runs them from the
SQLite job table inside the process; `postgres` binds the same definitions to
procrastinate. The engine only names the jobs a stored reply asks for (those
with work, see `bot.turns.after_turn`) and wakes the queue (`JobQueue`).
"""

from bot.jobs.definitions import (
    FLUSH_IDLE_MEMORY,
    MAINTAIN_CONTEXT,
    OFFLOAD_MEMORY,
    Job,
    JobDefinitions,
    JobQueue,
    context_jobs,
    memory_jobs,
)

__all__ = [
    "FLUSH_IDLE_MEMORY",
    "MAINTAIN_CONTEXT",
    "OFFLOAD_MEMORY",
    "JobDefinitions",
    "JobQueue",
    "Job",
    "context_jobs",
    "memory_jobs",
]
