"""The widget in headless Chromium: the recorder (a fake microphone), audio files, spoken replies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright

from bot.providers.openai import OpenAICompatibleProvider
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import audio_file
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.web.test_widget_browser import CHROMIUM, CHROMIUM_ARGS, FINISHED_ASSISTANT, open_demo, send

# Chromium's fake microphone plays a beep; the fake UI grants the permission prompt.
MICROPHONE_ARGS = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]
SHADOW = "document.querySelector('#chorus-widget').shadowRoot"

pytestmark = needs_chromium


@pytest_asyncio.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *MICROPHONE_ARGS]
        )
        yield launched
        await launched.close()


@pytest_asyncio.fixture
async def live(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> AsyncIterator[LiveServer]:
    runtime = runtimes(
        tmp_path,
        provider=OpenAICompatibleProvider(fake_openai.base_url),
        speech_base_url=fake_speech.base_url,
        limits_audio_max_seconds=60,
    )
    async with LiveServer(create_app(runtime)) as server:
        yield server


async def replies(page: Page) -> int:
    return await page.locator(FINISHED_ASSISTANT).count()


async def test_the_recorder_sends_a_voice_message_that_is_heard(
    browser: Browser, live: LiveServer, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    fake_speech.say("hello from the microphone")
    page = await open_demo(browser, live.base_url)
    microphone = page.get_by_role("button", name="Record a voice message")

    await microphone.click()
    # The button counts the recording's seconds as the browser hands over its pieces.
    recording = page.get_by_role("button", name="Stop recording and send")
    await recording.filter(has_text="0:02").wait_for()
    assert await recording.locator("svg[data-icon=stop]").count() == 1
    await recording.click()
    await page.locator(FINISHED_ASSISTANT).wait_for()

    [heard] = fake_speech.transcriptions
    # Heard as WAV (what every speech server reads), decoded from the browser's WebM/Opus.
    assert heard.filename == "voice-message.wav" and 1.5 < (heard.seconds or 0) < 10
    said = last_user_text(fake_openai.requests[0].json)
    assert said.startswith("[voice message, 0:0") and said.endswith("] hello from the microphone")
    assert await page.locator("[data-voice] audio").count() == 1
    # After a reload the stored recording (as the browser made it) plays from the server.
    await page.reload()
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    await page.locator("[data-author=user] audio[data-loaded][aria-label='voice-message.webm']").wait_for()


async def test_an_audio_file_attached_is_heard(
    browser: Browser, live: LiveServer, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    fake_speech.say("la la la")
    page = await open_demo(browser, live.base_url)
    await page.locator("input[type=file]").set_input_files(
        files=[{"name": "song.mp3", "mimeType": "audio/mpeg", "buffer": audio_file(3)}]
    )
    await send(page, "my song")

    assert last_user_text(fake_openai.requests[0].json) == "my song\n\n[audio: song.mp3, 0:03] la la la"


async def test_voice_on_gives_each_reply_a_player(
    browser: Browser, live: LiveServer, fake_speech: FakeSpeech
) -> None:
    page = await open_demo(browser, live.base_url)
    await page.fill("textarea", "/voice on")
    await page.press("textarea", "Enter")
    await page.locator("[data-role=notice]").filter(has_text="Spoken replies are on").wait_for()
    await send(page, "tell me **something**")

    player = page.locator(f"{FINISHED_ASSISTANT} [data-role=spoken-reply] audio[data-loaded]")
    await player.wait_for()
    await page.wait_for_function(
        f"() => {SHADOW}.querySelector('[data-role=spoken-reply] audio').duration > 0"
    )
    [spoken] = fake_speech.speeches
    assert spoken.body["response_format"] == "mp3"
    assert spoken.body["input"].endswith("tell me something.")
