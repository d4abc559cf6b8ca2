"""A runtime on a temporary database talking to the fake OpenAI server, memory off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.runtime import Runtime
from bot.storage.models import ChatSession
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import inbound


def runtime(build: Callable[..., Runtime], tmp_path: Path, server: FakeOpenAI, **overrides: Any) -> Runtime:
    """A runtime on `server` built by `build` (the `runtimes` fixture, which closes it)."""
    settings: dict[str, Any] = {
        "model_base_url": server.base_url,
        "model_max_retries": 0,
        "memory_enabled": False,
    }
    settings.update(overrides)
    return build(tmp_path, **settings)


async def say(rt: Runtime, text: str, **fields: Any) -> str:
    """One turn, background work included; returns the reply text."""
    reply = await rt.engine.respond(inbound(text, **fields))
    await rt.engine.drain()
    return reply.text


def session_of(rt: Runtime, user_id: str = "u1") -> ChatSession:
    account = rt.stores.identities.find_account("web", user_id)
    assert account is not None
    session = rt.stores.sessions.private_session(account.person_id, "ada")
    return rt.stores.sessions.get_session(session.id) or session


def chat_requests(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [request.json for request in server.requests if not request.is_summary]
