"""The console's transcript shows a voice note as a player with what the model reads of it."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser

from channels.web.app import create_app
from tests.admin.seed import ADMIN_TOKEN, admin_runtime
from tests.admin.test_console_browser import DEADLINE_MS, browser  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import voice_note
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.support.runtime import attachment, inbound

pytestmark = needs_chromium


async def test_a_voice_note_shows_its_player_and_transcript(
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    fake_speech: FakeSpeech,
) -> None:
    fake_speech.say("hello console")
    runtime = admin_runtime(
        tmp_path, model_base_url=fake_openai.base_url, speech_base_url=fake_speech.base_url
    )
    recording = attachment("voice.ogg", "audio/ogg", voice_note(3), kind="voice")
    reply = await runtime.engine.respond(inbound("", attachments=(recording,)))
    try:
        async with LiveServer(create_app(runtime)) as live:
            page = await (await browser.new_context()).new_page()
            page.set_default_timeout(DEADLINE_MS)
            await page.goto(live.base_url + "/admin")
            await page.fill("#token", ADMIN_TOKEN)
            await page.click("button[type=submit]")
            await page.click(f"tr[data-session='{reply.session_id}']")

            voice = page.locator("[data-voice='voice.ogg']")
            await voice.locator("audio").wait_for()
            assert await voice.locator(".doc-text").inner_text() == "[voice message, 0:03] hello console"
    finally:
        await runtime.aclose()
