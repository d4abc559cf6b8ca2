"""The console's transcript shows what the model did with tools, in headless Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from playwright.async_api import Browser

from channels.web.app import create_app
from tests.admin.seed import Seeded, admin_runtime
from tests.admin.test_console_browser import Console, browser, logged_in  # noqa: F401
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.support.runtime import inbound

pytestmark = needs_chromium


@pytest_asyncio.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    runtime = admin_runtime(tmp_path)
    # The offline demo model answers "what did I say about …" by calling `recall`.
    await runtime.engine.respond(inbound("my cat is called Miso", user_id="alice"))
    reply = await runtime.engine.respond(inbound("what did I say about my cat?", user_id="alice"))
    async with LiveServer(create_app(runtime)) as live:
        yield Console(live.base_url, runtime, Seeded(reply.session_id or "", ""), "")
    await runtime.aclose()


async def test_transcript_shows_each_call_with_its_arguments_and_result(
    browser: Browser,  # noqa: F811
    console: Console,
) -> None:
    page = await logged_in(browser, console)
    await page.click(f"tr[data-session='{console.seeded.private_id}']")
    await page.wait_for_selector("[data-testid=transcript]")

    call = page.locator(".call")
    assert await call.locator(".call-name").inner_text() == "recall"
    assert await call.locator(".call-name svg").get_attribute("aria-label") == "Tool call"
    # Indented, as JSON is read.
    assert await call.locator(".arguments").inner_text() == '{\n  "query": "my cat"\n}'
    call_id = await call.get_attribute("data-call-id")
    result = page.locator(f"[data-role=tool][data-call-id='{call_id}']")
    assert (await result.locator(".who").inner_text()).lower() == "recall result"
    assert '\n  "query": "my cat"' in await result.locator(".result").inner_text()
