"""The terminal lane behind `chorus chat`: stdin lines in, streamed text out."""

from __future__ import annotations

import asyncio
import getpass
import sys
import uuid
from typing import TextIO

from bot.turns.engine import TurnEngine
from bot.turns.events import Delta, Reply
from bot.turns.inbound import Actor, InboundMessage

PROMPT = "you › "


async def chat_loop(
    engine: TurnEngine,
    *,
    user: str | None = None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> None:
    """Talk to the engine until end of input; commands work as on every lane."""
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
            lane="terminal",
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
            elif isinstance(event, Reply):
                _write_reply(stdout, event, streamed)


def _write_reply(stdout: TextIO, reply: Reply, streamed: bool) -> None:
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
