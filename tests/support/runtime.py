"""Build a real Chorus runtime on a temporary SQLite database for tests.

As the `chorus` command does, it loads `channels` before any settings are read: the lanes
register with the runtime then, and the settings have their sections.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import channels  # noqa: F401  (registers the lanes)
from bot.config import Settings, load_settings
from bot.providers.base import ChatProvider
from bot.runtime import Runtime, build_runtime
from bot.turns.inbound import Actor, InboundAttachment, InboundMessage

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config.yaml"
_message_ids = itertools.count(1)
# `make_runtime`'s signature; the `runtimes` fixture (tests/conftest.py) is one that closes what it builds.
RuntimeFactory = Callable[..., Runtime]


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """The shipped config.yaml, pointed at `tmp_path`, with `overrides` merged in.

    Overrides use the environment naming (`model_base_url="http://…"` sets
    `model.base_url`), the same path an operator uses. Dense recall is off unless a
    test turns it on (`memory_dense=True`): embedding every offloaded message would
    cost the whole suite minutes on two cores, and tests/memory/test_dense.py covers it.
    Web strangers are members unless a test says otherwise (docs/access.md).
    """
    environ = {
        "CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}",
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
        "CHORUS_MEMORY_DENSE": "false",
        # Web turns of tests about other things run as members (every tool, as before audiences);
        # tests of access set `channels_web_access_strangers="public"` (tests/access).
        "CHORUS_CHANNELS_WEB_ACCESS_STRANGERS": "members",
    }
    for key, value in overrides.items():
        environ["CHORUS_" + key.upper()] = value if isinstance(value, str) else _json(value)
    return load_settings(REPO_CONFIG, environ)


def make_runtime(tmp_path: Path, provider: ChatProvider | None = None, **overrides: Any) -> Runtime:
    return build_runtime(make_settings(tmp_path, **overrides), provider=provider)


def inbound(
    text: str,
    *,
    lane: str = "web",
    user_id: str = "u1",
    display_name: str = "Alice",
    chat_id: str | None = None,
    chat_kind: str = "private",
    thread_id: str | None = None,
    message_id: str | None = None,
    attachments: tuple[InboundAttachment, ...] = (),
    was_mentioned: bool = False,
) -> InboundMessage:
    """An inbound message as a lane would build it."""
    return InboundMessage(
        lane=lane,  # type: ignore[arg-type]
        platform_message_id=message_id or f"m{next(_message_ids)}",
        chat_id=chat_id or user_id,
        chat_kind=chat_kind,  # type: ignore[arg-type]
        actor=Actor(user_id=user_id, display_name=display_name, username=display_name.lower()),
        text=text,
        thread_id=thread_id,
        was_mentioned=was_mentioned,
        attachments=attachments,
    )


def attachment(filename: str, mime_type: str, data: bytes, kind: str = "document") -> InboundAttachment:
    async def fetch() -> bytes:
        return data

    return InboundAttachment(
        kind=kind,
        filename=filename,
        mime_type=mime_type,  # type: ignore[arg-type]
        size=len(data),
        fetch=fetch,
    )


def _json(value: Any) -> str:
    import json

    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
