from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.fakes.speech_server import FakeSpeech


@pytest_asyncio.fixture
async def fake_speech() -> AsyncIterator[FakeSpeech]:
    async with FakeSpeech() as server:
        yield server
