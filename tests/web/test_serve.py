"""A real `chorus serve` on a port of its own, asked over HTTP what it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.durable.serve_process import ServeProcess


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[ServeProcess]:
    # A default start but for the port: the web lane alone, on one the operator chose.
    process = ServeProcess(tmp_path, {"CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}"})
    try:
        await process.start()
        yield process
    finally:
        process.kill()


async def test_healthz_lists_the_web_lane_as_running(serve: ServeProcess) -> None:
    async with httpx.AsyncClient(base_url=serve.url) as client:
        health = (await client.get("/healthz")).json()
    assert health["status"] == "ok"
    assert list(health["lanes"]) == ["web"]
    assert health["lanes"]["web"]["state"] == "running" and health["lanes"]["web"]["reason"] is None

