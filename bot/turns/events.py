"""What a turn hands back to a lane: text deltas, thinking and tool steps, then exactly one `Reply`; and
what a command hands back to the turn (`CommandAnswer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ReplyKind = Literal["assistant", "command", "error", "duplicate", "recorded", "refused"]
# `asked`: the call waits for a person's yes or no (`approval_id` names the question);
# `denied`: it was refused, expired or cancelled, and did not run.
ToolStatus = Literal["started", "progress", "asked", "done", "error", "denied"]
# What each status's line starts with.
STATUS_MARKS = {"asked": "❓", "error": "⚠️", "denied": "🚫"}


@dataclass(frozen=True)
class Delta:
    """A piece of the assistant's reply as it streams, and the persona writing it.

    It also names the session, so a lane can offer a Stop control while the reply streams.
    """

    text: str
    persona_id: str | None = None
    persona_name: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class Thinking:
    """The model started thinking (again) before or between pieces of its answer.

    Lanes show "💭 thinking…" in the draft until text or a tool step follows; what it
    thinks is not in the event: it comes with the `Reply` when the person asked to see it.
    """

    persona_id: str | None = None
    persona_name: str | None = None
    session_id: str | None = None


THINKING_LINE = "💭 thinking…"


@dataclass(frozen=True)
class Reply:
    """The end of a turn.

    `assistant`: the model's stored reply. `command`: a command's answer.
    `error`: a clear message about what went wrong (the user's message, if any,
    stays stored). `duplicate`: the platform re-delivered a message that was
    already answered — lanes send nothing. `recorded`: stored as context
    without a reply (a group message not addressed to the bot). `refused`: a stranger the lane's
    access does not let in, who is told nothing (docs/access.md) — lanes send nothing.
    """

    kind: ReplyKind
    text: str
    session_id: str | None = None
    message_id: int | None = None
    user_message_id: int | None = None
    persona_id: str | None = None
    persona_name: str | None = None
    status: str = "complete"
    # Set when the conversation has spoken replies (/voice on): the words a lane also sends
    # as audio (the stored reply, without notes about the turn). None: text only.
    spoken_text: str | None = None
    # Set when the conversation shows the model's thinking (/reasoning on) and it thought:
    # everything it thought this turn, which lanes show folded beside the reply.
    reasoning: str | None = None

    @property
    def should_send(self) -> bool:
        return self.kind in ("assistant", "command", "error") and bool(self.text)


@dataclass(frozen=True)
class ToolStep:
    """A tool call of the turn starting, reporting progress or ending, for the lane to show
    ("🔧 recall: dentist", "🔧 fetch: report.pdf · 2/4").

    The text streamed before a call's `started` step belonged to that tool round (it is
    stored with the call), so a lane showing progress lines drops it; the answer's text
    streams anew after the last step. `summary` is short and meant for people: the
    call's main argument, never its result; so is `progress`, how far a running call
    is by its own report (`2/4`, or its words), set on `progress` steps only.
    """

    call_id: str
    name: str
    status: ToolStatus
    summary: str = ""
    session_id: str | None = None
    # Who is calling: a lane that has shown nothing yet knows whose reply the progress line opens.
    persona_id: str | None = None
    persona_name: str | None = None
    progress: str = ""
    # Set on `asked` steps: the approval a lane's yes/no buttons answer (`Approvals.decide`).
    approval_id: int | None = None

    @property
    def call_text(self) -> str:
        """The tool and what it was asked ("recall: dentist"), without a mark or a state."""
        return f"{self.name}: {self.summary}" if self.summary else self.name

    @property
    def progress_line(self) -> str:
        """One line for a draft: a mark of the call's state, then `progress_words`."""
        return f"{STATUS_MARKS.get(self.status, '🔧')} {self.progress_words}"

    @property
    def progress_words(self) -> str:
        """The tool, what it was asked, and how far it is (or its approval), without a mark
        (a lane that draws its own, such as the web's icons, shows these words beside it)."""
        words = self.call_text
        if self.status == "asked":
            return f"{words} · run it? (yes/no)"
        if self.status == "denied":
            return f"{words} · not run"
        return f"{words} · {self.progress}" if self.progress else words


TurnEvent = Delta | Thinking | ToolStep | Reply


@dataclass(frozen=True)
class CommandAnswer:
    """What a chat command answered: the engine stores it and ends the turn with it."""

    text: str
    ok: bool = True
    # Set when the command moved the route to another session (/new, /link).
    session_id: str | None = None
