"""The system message and the turn's note: what stays put, and what changes every turn.

Steady first, changing last (docs/context.md): the system message holds the persona prompt
and what changes only in steps (the summary, the memory snapshot), so a model server's cache
of it holds from turn to turn. What changes every turn (recall hits, documents outside the
window) is the turn's note, folded into the newest user message after its text: every
provider and chat template accepts it there, and the history above it stays a prefix.
A summary or memory items stored since the window's last step are part of the note too,
until the next step moves them into the system message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SUMMARY_HEADING = "Summary of the earlier conversation"
MEMORY_HEADING = "Long-term memory"
RECALL_HEADING = "Recalled from earlier"
DOCUMENTS_HEADING = "Documents shared earlier in this conversation"
NEW_SUMMARY_HEADING = "Summary of the earlier conversation, updated"
NEW_MEMORY_HEADING = "Long-term memory, newly stored"


def section(heading: str, body: str) -> str:
    return f"## {heading}\n{body}"


@dataclass(frozen=True)
class Preamble:
    """The request's earlier-context parts in order; an empty part is left out."""

    system: str
    summary: str = ""
    memory: str = ""
    recall: str = ""
    documents: str = ""
    # Stored since the window's last step: shown in the note until the next step.
    new_summary: str = ""
    new_memory: str = ""

    def text(self) -> str:
        """The system message: the parts that stay put between window steps."""
        parts = (self.system, self.summary, self.memory)
        return "\n\n".join(part for part in parts if part)

    def note(self) -> str:
        """The turn's note, beside the newest user message: the parts that change every turn."""
        parts = (self.new_summary, self.new_memory, self.recall, self.documents)
        return "\n\n".join(part for part in parts if part)


def preamble(
    system_prompt: str,
    summary: str | None,
    memory: str | None,
    recall: Sequence[str],
    new_summary: str | None = None,
    new_memory: str | None = None,
) -> Preamble:
    """The preamble without its documents section, which depends on the window."""
    recalled = [item for item in recall if item.strip()]
    return Preamble(
        system=system_prompt,
        summary=section(SUMMARY_HEADING, summary) if summary else "",
        memory=section(MEMORY_HEADING, memory) if memory else "",
        recall=section(RECALL_HEADING, "\n".join(f"- {item}" for item in recalled)) if recalled else "",
        new_summary=section(NEW_SUMMARY_HEADING, new_summary) if new_summary else "",
        new_memory=section(NEW_MEMORY_HEADING, new_memory) if new_memory else "",
    )


def documents_section(blocks: Sequence[str]) -> str:
    return section(DOCUMENTS_HEADING, "\n\n".join(blocks)) if blocks else ""
