"""A real `chorus serve` on a port of its own, asked over HTTP what it runs and how to embed it."""

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


async def test_the_demo_page_names_the_address_it_was_served_from(serve: ServeProcess) -> None:
    async with httpx.AsyncClient(base_url=serve.url) as client:
        page = (await client.get("/")).text
        proxied = (await client.get("/", headers={"Host": "chat.example.org"})).text
    assert serve.port != 8080
    assert f'&lt;script src="{serve.url}/widget.js"&gt;&lt;/script&gt;' in page
    assert "8080" not in page
    # Behind a proxy that passes the Host header on, the address is the one the browser asked for.
    assert '&lt;script src="http://chat.example.org/widget.js"&gt;' in proxied
