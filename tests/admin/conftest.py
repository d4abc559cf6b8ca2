from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from bot.runtime import Runtime
from channels.web.app import create_app
from tests.admin.seed import admin_runtime
from tests.fakes.openai_server import fake_openai_fixture  # noqa: F401

BASE_URL = "http://console.test"


@pytest_asyncio.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    built = admin_runtime(tmp_path)
    yield built
    await built.aclose()


@pytest_asyncio.fixture
async def client(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
    ) as http:
        yield http
