from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from channels.web.app import create_app
from tests.support.runtime import RuntimeFactory

ClientFactory = Callable[..., Awaitable[httpx.AsyncClient]]


@dataclass(frozen=True)
class Event:
    name: str
    data: dict[str, Any]


def parse_events(body: str) -> list[Event]:
    events = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append(Event(lines["event"], json.loads(lines["data"])))
    return events


@pytest_asyncio.fixture
async def make_client(tmp_path: Path, runtimes: RuntimeFactory) -> AsyncIterator[ClientFactory]:
    """A factory of httpx clients talking to the app of a fresh runtime (settings overridable)."""
    clients: list[httpx.AsyncClient] = []

    async def make(**overrides: Any) -> httpx.AsyncClient:
        runtime = runtimes(tmp_path / f"runtime{len(clients)}", **overrides)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url="http://chat.test"
        )
        client.runtime = runtime  # type: ignore[attr-defined]
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest_asyncio.fixture
async def client(make_client: ClientFactory) -> httpx.AsyncClient:
    return await make_client()
