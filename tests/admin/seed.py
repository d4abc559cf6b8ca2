"""A runtime with the console on, and conversations with everything the console shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.providers.base import ChatProvider
from bot.runtime import Runtime
from tests.support.files import png_image
from tests.support.runtime import attachment, inbound, make_runtime

ADMIN_TOKEN = "admin-token-for-tests-7f3a"
BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
DOCUMENT_TEXT = "Release checklist: the launch code is AZURE-42."
DECISION = "We decided to use PostgreSQL for storage because it scales to many processes."


def admin_runtime(tmp_path: Path, provider: ChatProvider | None = None, **overrides: Any) -> Runtime:
    return make_runtime(tmp_path, provider, channels_web_admin_token=ADMIN_TOKEN, **overrides)


@dataclass(frozen=True)
class Seeded:
    private_id: str
    group_id: str


async def seed(runtime: Runtime) -> Seeded:
    """Alice's private chat (image, document, persona switch, snip, memory) and a Telegram group."""
    engine = runtime.engine
    first = await engine.respond(inbound("hello there", user_id="alice", display_name="Alice"))
    await engine.respond(
        inbound(
            "what is in this picture?",
            user_id="alice",
            display_name="Alice",
            attachments=(attachment("cat.png", "image/png", png_image(), kind="image"),),
        )
    )
    await engine.respond(
        inbound(
            "please keep this",
            user_id="alice",
            display_name="Alice",
            attachments=(attachment("checklist.txt", "text/plain", DOCUMENT_TEXT.encode()),),
        )
    )
    await engine.respond(inbound("/persona sage", user_id="alice", display_name="Alice"))
    await engine.respond(inbound(DECISION, user_id="alice", display_name="Alice"))
    await engine.respond(inbound("/snip 2", user_id="alice", display_name="Alice"))
    for sender, text in (("Bob", "morning all"), ("Carol", "@bot what's the plan?")):
        await engine.respond(
            inbound(
                text,
                lane="telegram",
                user_id=sender.lower(),
                display_name=sender,
                chat_id="-100777",
                chat_kind="group",
                was_mentioned=True,
            )
        )
    await engine.drain()
    assert first.session_id is not None
    private = runtime.stores.sessions.get_session(first.session_id)
    assert private is not None and runtime.memory is not None
    await runtime.memory.flush(private)
    groups = [chat for chat, _ in runtime.stores.sessions.list_sessions() if chat.kind == "group"]
    return Seeded(private_id=first.session_id, group_id=groups[0].id)
