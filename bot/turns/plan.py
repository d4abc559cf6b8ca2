"""One turn's plan: what every step of a turn reads and adds to, from its stored message to its reply.

The engine makes it (`bot.turns.engine`), the round runner fills in what the model
said and billed (`bot.turns.rounds`), the recorder stores the reply it describes
(`bot.turns.recorder`). It holds no collaborator: only the turn's own facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.config import Audience
from bot.providers.base import Usage
from bot.storage.message_append import StoredMessage
from bot.storage.models import ChatSession
from bot.tools.base import ChatAddress
from bot.turns.events import Reply
from bot.turns.stops import RunningTurn
from persona import Persona


@dataclass
class TurnPlan:
    session: ChatSession
    persona: Persona
    user_message_id: int
    running: RunningTurn
    # Said after the reply: why the person's voice note was not understood (once a conversation).
    notice: str | None = None
    # /voice on: the lane also sends the reply as audio.
    spoken: bool = False
    # Where the person asked (tools see it), and whether a restart is finishing the turn.
    chat: ChatAddress | None = None
    resumed: bool = False
    # /reasoning on: the reply carries the turn's thinking; `thought` holds each call's.
    shows_reasoning: bool = False
    thought: list[str] = field(default_factory=list)
    # The model that answered the turn's last call (a fallback's, when the router moved on).
    model: str | None = None
    # What the server billed for the turn's calls so far (None: it reported nothing).
    usage: Usage | None = None
    # Who asks (bot.turns.access), and the offered tools whose calls wait for a yes.
    audience: Audience = "members"
    asking: frozenset[str] = frozenset()
    # Who asked (`<lane>:<platform user id>`, None when unknown): they may approve the turn's
    # calls that wait for a yes when they are a member (`Access.may_decide`).
    asker: str | None = None
    asker_name: str | None = None
    # Calls a shutdown cut while they waited for a yes: left, with the turn, to the next process.
    left_waiting: set[str] = field(default_factory=set)
    # Calls another process ran after a yes both waited on: that process goes on with the turn.
    handed_over: set[str] = field(default_factory=set)

    def reply(self, text: str, stored: StoredMessage, status: str = "complete") -> Reply:
        """The turn's final reply, once `stored` holds what was said."""
        return assistant_reply(
            with_note(text, self.notice) if self.notice else text,
            self.persona,
            self.session.id,
            status=status,
            message_id=stored.id,
            user_message_id=self.user_message_id,
            spoken=self.spoken and status == "complete" and bool(stored.content.strip()),
            spoken_text=stored.content,
            reasoning="\n\n".join(self.thought) if self.shows_reasoning and self.thought else None,
        )


def with_note(text: str, note: str) -> str:
    """A cut reply's text and the note saying why (the note alone when nothing arrived)."""
    return f"{text}\n\n{note}" if text.strip() else note


def assistant_reply(
    text: str,
    persona: Persona,
    session_id: str,
    *,
    status: str = "complete",
    message_id: int | None = None,
    user_message_id: int | None = None,
    spoken: bool = False,
    spoken_text: str = "",
    reasoning: str | None = None,
) -> Reply:
    """A turn's final reply, live or recovered; lanes show who spoke (a persona's name or webhook)."""
    return Reply(
        kind="assistant",
        text=text,
        session_id=session_id,
        message_id=message_id,
        user_message_id=user_message_id,
        persona_id=persona.id,
        persona_name=persona.name,
        status=status,
        spoken_text=spoken_text if spoken else None,
        reasoning=reasoning,
    )
