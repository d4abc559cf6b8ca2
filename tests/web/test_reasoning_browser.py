"""The widget in Chromium with a reasoning model: the thinking folded in a `<details>` after
/reasoning on, live and after a reload."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser

from bot.providers.openai import OpenAICompatibleProvider
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.web.test_widget_browser import browser, open_demo, send  # noqa: F401

THOUGHT = "Two and two make four."
pytestmark = needs_chromium


async def test_reasoning_on_shows_the_thinking_folded_beside_the_reply(
    runtimes, browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "/reasoning on")
        await page.press("textarea", "Enter")
        await page.get_by_text("Reasoning is on").wait_for()
        fake_openai.script(Reply("It is 4.", reasoning=THOUGHT))
        await send(page, "2+2?")

        fold = page.locator("details[data-role=reasoning]")
        assert await fold.count() == 1
        assert await fold.get_attribute("open") is None
        assert (await fold.inner_text()).strip().startswith("💭 Thinking")
        await fold.locator("summary").click()
        assert THOUGHT in await fold.inner_text()

        await page.reload()
        await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
        await page.locator("details[data-role=reasoning]").first.wait_for(state="attached")
        assert await page.locator("[data-event=reasoning]").count() == 1
