"""The terminal lane behind `chorus chat`: stdin lines in, streamed text out."""

from __future__ import annotations

import asyncio
import getpass
import sys
import uuid
from typing import TextIO

from bot.reminders.delivery import ReminderDelivery, ReminderLanes
from bot.turns.engine import TurnEngine
from bot.turns.events import THINKING_LINE, Delta, Reply, Thinking, ToolStep
from bot.turns.inbound import Actor, InboundMessage

PROMPT = "you › "
LANE = "terminal"


class TerminalReminders:
    """The terminal's `ReminderLane`: a due reminder is printed above a fresh prompt."""

    def __init__(self, stdout: TextIO) -> None:
        self.stdout = stdout

    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        self.stdout.write(f"\n{delivery.persona.name} › {delivery.text}\n{PROMPT}")
        self.stdout.flush()
        return None


async def chat_loop(
    engine: TurnEngine,
    *,
    user: str | None = None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    reminders: ReminderLanes | None = None,
) -> None:
    """Talk to the engine until end of input; commands work as on every lane, and reminders
    set here are printed when they fall due while the chat runs."""
    if reminders is not None:
        shown = TerminalReminders(stdout)
        reminders.register(LANE, shown)
        try:
            await _talk(engine, user, stdin, stdout)
        finally:
            reminders.unregister(LANE, shown)
    else:
        await _talk(engine, user, stdin, stdout)


async def _talk(engine: TurnEngine, user: str | None, stdin: TextIO, stdout: TextIO) -> None:
    user_id = user or getpass.getuser()
    actor = Actor(user_id=user_id, display_name=user_id, username=user_id)
    stdout.write("Chorus terminal chat — /help for commands, Ctrl-D to leave.\n")
    while True:
        stdout.write(PROMPT)
        stdout.flush()
        line = await asyncio.to_thread(stdin.readline)
        if not line:
            stdout.write("\n")
            return
        text = line.rstrip("\n")
        if not text.strip():
            continue
        inbound = InboundMessage(
            lane=LANE,
            platform_message_id=uuid.uuid4().hex,
            chat_id=user_id,
            chat_kind="private",
            actor=actor,
            text=text,
        )
        streamed = False
        async for event in engine.stream(inbound):
            if isinstance(event, Delta):
                if not streamed:
                    stdout.write("bot › ")
                    streamed = True
                stdout.write(event.text)
                stdout.flush()
            elif isinstance(event, ToolStep):
                streamed = _write_step(stdout, event, streamed)
                if event.status == "asked" and event.approval_id is not None:
                    await _answer_approval(engine, event.approval_id, f"{LANE}:{user_id}", stdin, stdout)
            elif isinstance(event, Thinking):
                stdout.write(f"\n  {THINKING_LINE}\n" if streamed else f"  {THINKING_LINE}\n")
                stdout.flush()
                streamed = False
            else:
                _write_reply(stdout, event, streamed)


async def _answer_approval(
    engine: TurnEngine, approval_id: int, decider: str, stdin: TextIO, stdout: TextIO
) -> None:
    """The call waits for the person's y/n, asked on the next line; anything but y denies it."""
    stdout.write("  run it? [y/N] ")
    stdout.flush()
    line = await asyncio.to_thread(stdin.readline)
    decided = await engine.approvals.decide(approval_id, line.strip().lower() in ("y", "yes"), decider)
    stdout.write(f"  {decided.text}\n")
    stdout.flush()


# ANSI dim and reset: the thinking reads as an aside.
DIM = "\x1b[2m"
PLAIN = "\x1b[0m"


def _write_step(stdout: TextIO, step: ToolStep, streamed: bool) -> bool:
    """A call starting, reporting progress or failing gets a line of its own; the answer then
    starts a new line.

    Returns whether a line of streamed text is still open.
    """
    if step.status == "done":
        return streamed
    if streamed:
        stdout.write("\n")
    stdout.write(f"  {step.progress_line}\n")
    stdout.flush()
    return False


def _write_reply(stdout: TextIO, reply: Reply, streamed: bool) -> None:
    if reply.reasoning:
        # /reasoning on: the thinking, dimmed and marked, after the answer it led to.
        thought = "\n".join(
            f"{DIM}  💭 {line}{PLAIN}" for line in reply.reasoning.splitlines() if line.strip()
        )
        stdout.write(f"{thought}\n" if not streamed else f"\n{thought}")
    if streamed:
        if reply.status != "complete" or reply.kind == "error":
            # Stopped and cut-off replies end with their own bracketed note.
            last = reply.text.splitlines()[-1]
            stdout.write(f"\n{last}" if last.startswith("[") else f"\n[{last}]")
        stdout.write(f"\n  — {reply.persona_name}\n" if reply.persona_name else "\n")
    elif reply.text:
        label = reply.persona_name if reply.kind == "assistant" else "chorus"
        stdout.write(f"{label} › {reply.text}\n")
    stdout.flush()
