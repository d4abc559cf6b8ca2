"""The chat loop of `chorus chat`: a line in, a turn on the engine, its events on the screen.

What the screen and the input are depends on where the chat runs: in a terminal, line
editing with history (`editor`) and replies rendered as Markdown (`styled`); fed by a pipe
or read by a script, plain lines exactly as before (`plain`). The loop is the same for all
of them: Ctrl-C stops the reply being written (a second one abandons it), a turn that fails
is told on the screen and the chat goes on, and end of input (Ctrl-D) leaves.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import sys
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Protocol, TextIO

from bot.reminders.delivery import ReminderDelivery, ReminderLanes
from bot.turns.engine import TurnEngine
from bot.turns.events import Delta, Reply, Thinking, ToolStep
from bot.turns.inbound import Actor, InboundMessage
from channels.terminal import interrupts
from channels.terminal.plain import PROMPT, PlainInput, PlainScreen

log = logging.getLogger(__name__)

LANE = "terminal"
APPROVAL_PROMPT = "  run it? [y/N] "


class LineInput(Protocol):
    @property
    def clears_line_on_interrupt(self) -> bool:
        """Whether Ctrl-C at the prompt reaches the chat as a signal that clears the line."""

    async def line(self, prompt: str, *, remember: bool = True) -> str | None:
        """The next line typed after `prompt`; None at the end of input or once `interrupt`ed.

        `remember`: whether it joins the history the Up arrow recalls (an approval's y/n does not).
        """

    def interrupt(self) -> None:
        """End the line being waited for, as if nothing was typed."""

    def quiet_keys(self) -> AbstractContextManager[None]:
        """While a reply plays: keys typed are kept for the next prompt rather than drawn over it."""

    async def above_prompt(self, show: Callable[[], None]) -> None:
        """Run `show`, which writes to the screen, without garbling a prompt that may be waiting."""


class Screen(Protocol):
    def banner(self) -> None: ...

    def farewell(self) -> None: ...

    def cleared(self) -> None:
        """Ctrl-C at a prompt: the typed line is gone; a fresh prompt follows."""

    def show(self, event: Delta | Thinking | ToolStep) -> None: ...

    def reply(self, reply: Reply) -> None:
        """The turn's end: its reply (or command answer, or error)."""

    def turn_failed(self, text: str) -> None:
        """The turn ended without a reply (it failed, or was abandoned): `text` says so."""

    def approval_decided(self, text: str) -> None: ...

    def reminder(self, persona_name: str, text: str) -> None: ...


class TerminalReminders:
    """The terminal's `ReminderLane`: a due reminder is shown above a fresh prompt."""

    def __init__(self, screen: Screen, lines: LineInput) -> None:
        self.screen = screen
        self.lines = lines

    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        persona_name, text = delivery.persona.name, delivery.text
        await self.lines.above_prompt(lambda: self.screen.reminder(persona_name, text))
        return None


async def chat_loop(
    engine: TurnEngine,
    *,
    user: str | None = None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    reminders: ReminderLanes | None = None,
    history: Path | None = None,
) -> None:
    """Talk to the engine until end of input; commands work as on every lane, and reminders
    set here are shown when they fall due while the chat runs.

    `history`: the file the typed lines are kept in between runs, when the chat runs in a terminal.
    """
    screen, lines = _terminal(engine, stdin, stdout, history)
    chat = TerminalChat(engine, user or getpass.getuser(), screen, lines)
    if reminders is None:
        await chat.run()
        return
    shown = TerminalReminders(screen, lines)
    reminders.register(LANE, shown)
    try:
        await chat.run()
    finally:
        reminders.unregister(LANE, shown)


def _terminal(
    engine: TurnEngine, stdin: TextIO, stdout: TextIO, history: Path | None
) -> tuple[Screen, LineInput]:
    """Rendered replies when stdout is a terminal, line editing when both ends are; plain otherwise."""
    if not stdout.isatty():
        return PlainScreen(stdout), PlainInput(stdin, stdout)
    # Imported here: rich and prompt_toolkit load only for a chat in a terminal.
    from channels.terminal.styled import StyledScreen

    if not stdin.isatty():
        return StyledScreen(stdout), PlainInput(stdin, stdout)
    from channels.terminal.editor import KEYS, EditedInput

    commands = [f"/{name}" for name, _ in engine.commands.describe()]
    return StyledScreen(stdout, keys=KEYS), EditedInput(stdin, stdout, history, commands)


class TerminalChat:
    """One person's conversation in this terminal, a private chat on the lane `terminal`."""

    def __init__(self, engine: TurnEngine, user_id: str, screen: Screen, lines: LineInput) -> None:
        self.engine = engine
        self.actor = Actor(user_id=user_id, display_name=user_id, username=user_id)
        self.screen = screen
        self.lines = lines
        # The conversation's session, as the last event named it (None until a turn began).
        self.session_id: str | None = None
        self._turn: asyncio.Task[None] | None = None
        self._stop_asked = False
        # Approvals being cancelled after a Ctrl-C, kept until they are done.
        self._cancelling: set[asyncio.Task[int]] = set()

    async def run(self) -> None:
        self.screen.banner()
        while True:
            at_prompt = (
                interrupts.handled(self.screen.cleared)
                if self.lines.clears_line_on_interrupt
                else nullcontext()
            )
            with at_prompt:
                text = await self.lines.line(PROMPT)
            if text is None:
                self.screen.farewell()
                return
            if text.strip():
                await self.turn(text)

    async def turn(self, text: str) -> None:
        """One turn, whatever happens in it: it ends with the prompt back, never with the chat."""
        inbound = InboundMessage(
            lane=LANE,
            platform_message_id=uuid.uuid4().hex,
            chat_id=self.actor.user_id,
            chat_kind="private",
            actor=self.actor,
            text=text,
        )
        self._stop_asked = False
        self._turn = asyncio.create_task(self._play(inbound), name="terminal-turn")
        try:
            with interrupts.handled(self._interrupted), self.lines.quiet_keys():
                await asyncio.wait({self._turn})
            if self._turn.cancelled():
                self.screen.turn_failed("[Abandoned: the reply was left unfinished.]")
            elif (error := self._turn.exception()) is not None:
                if isinstance(error, BrokenPipeError):
                    # Nobody reads the chat any more (the pipe's other end is gone): it ends.
                    raise error
                log.error("a terminal turn failed", exc_info=error)
                self.screen.turn_failed(
                    f"[That turn failed: {type(error).__name__}: {error}. The chat goes on; "
                    "the log has the details.]"
                )
        finally:
            if not self._turn.done():
                # The chat itself is ending (cancelled): the turn ends with it.
                self._turn.cancel()
            self._turn = None

    async def _play(self, inbound: InboundMessage) -> None:
        async for event in self.engine.stream(inbound):
            self._note_session(event.session_id)
            if isinstance(event, Reply):
                self.screen.reply(event)
                continue
            self.screen.show(event)
            if isinstance(event, ToolStep) and event.status == "asked" and event.approval_id is not None:
                await self._answer_approval(event.approval_id)

    async def _answer_approval(self, approval_id: int) -> None:
        """The call waits for the person's y/n, asked on the next line; anything but y denies it."""
        answer = await self.lines.line(APPROVAL_PROMPT, remember=False)
        approved = answer is not None and answer.strip().lower() in ("y", "yes")
        decided = await self.engine.approvals.decide(approval_id, approved, f"{LANE}:{self.actor.user_id}")
        self.screen.approval_decided(decided.text)

    def _note_session(self, session_id: str | None) -> None:
        if session_id is None:
            return
        self.session_id = session_id
        if self._stop_asked:
            # Ctrl-C came before the turn named its session: it stops now.
            self._stop()

    def _interrupted(self) -> None:
        """Ctrl-C while a turn runs: the first stops the reply, as /stop does; a second abandons it."""
        if self._turn is None or self._turn.done():
            return
        if self._stop_asked:
            self._turn.cancel()
            return
        self._stop_asked = True
        self._stop()

    def _stop(self) -> None:
        # A question waiting for y/n is answered no; the turn then ends with what it has.
        self.lines.interrupt()
        if self.session_id is not None and self.engine.stop_turn(self.session_id):
            cancelling = asyncio.create_task(self.engine.cancel_approvals(self.session_id))
            self._cancelling.add(cancelling)
            cancelling.add_done_callback(self._cancelling.discard)
