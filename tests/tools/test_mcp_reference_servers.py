"""The npm MCP reference servers (`everything`, `filesystem`; pinned in tests/peers) in real turns:
what they really send — images that do not decode, binary resources, audio, images in structured
content, progress — and what the model and the person get: over real HTTP, on Telegram and in the
terminal."""

from __future__ import annotations

import io
import json
import logging
import random
import re
import wave
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from channels.terminal import chat_loop
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.telegram.bot_api_server import private_text
from tests.tools.mcp_support import READY_SECONDS, npm_server
from tests.tools.test_mcp_turns import (
    MEMBERS_RUN_ALL,
    answer,
    chat_requests,
    started_runtime,
    telegram_lane,
    tool_steps,
    web_visitor,
)
from tests.web.conftest import Event
from tests.web.test_tools import assert_documented, documented
from transcript.attachments import format_size

# The start of a PNG file in base64: what must never reach the model as text.
PNG_IN_BASE64 = "iVBORw0KGgo"
# The smallest image limit that lets the 2×2 PNG through and keeps NOISE out.
SMALL_LIMIT = 4096
LONG_RUNNING = "everything__trigger-long-running-operation"


def png(width: int, height: int, noise: bool = False) -> bytes:
    """A red PNG, or one of noise, which no compression makes small."""
    size = (width, height)
    image = Image.new("RGB", size, "red")
    if noise:
        image = Image.frombytes("RGB", size, random.Random(width).randbytes(width * height * 3))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "blue").save(buffer, format="JPEG")
    return buffer.getvalue()


def silence() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as recording:
        recording.setnchannels(1)
        recording.setsampwidth(2)
        recording.setframerate(8000)
        recording.writeframes(b"\0\0" * 800)
    return buffer.getvalue()


def media_folder(tmp_path: Path) -> Path:
    """Files `read_media_file` turns into each kind of content it sends."""
    folder = tmp_path / "media"
    folder.mkdir()
    (folder / "dot.png").write_bytes(png(2, 2))
    (folder / "noise.png").write_bytes(png(64, 64, noise=True))
    (folder / "photo.png").write_bytes(jpeg())
    (folder / "bitmap.bmp").write_bytes(b"BM" + bytes(64))
    (folder / "voice.wav").write_bytes(silence())
    (folder / "data.bin").write_bytes(bytes(range(200)))
    assert len((folder / "noise.png").read_bytes()) > SMALL_LIMIT
    return folder


def results_sent(model: FakeOpenAI) -> dict[str, str]:
    """The tool results the model was sent back last, by call id."""
    messages = chat_requests(model)[-1]["messages"]
    return {message["tool_call_id"]: message["content"] for message in messages if message["role"] == "tool"}


def image_parts(model: FakeOpenAI) -> list[dict[str, Any]]:
    messages = chat_requests(model)[-1]["messages"]
    return [
        part
        for message in messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]


def reads(folder: Path, *names: str) -> ToolCalls:
    return ToolCalls([("fs__read_media_file", {"path": str(folder / name)}) for name in names])


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    assert [record.getMessage() for record in caplog.records if record.exc_info] == []


async def test_an_image_that_does_not_decode_and_binary_resources_are_placeholders_and_the_turn_goes_on(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`get-tiny-image` sends a PNG whose iCCP chunk has a bad CRC: Pillow refuses it."""
    caplog.set_level(logging.WARNING)
    gzipped = {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resource"}
    fake_openai.script(
        ToolCalls(
            [
                ("everything__get-tiny-image", {}),
                ("everything__get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
                ("everything__gzip-file-as-resource", gzipped),
            ]
        ),
        "I could not see the logo.",
    )
    runtime = await started_runtime(
        runtimes,
        tmp_path,
        fake_openai,
        {"model_vision": True, **MEMBERS_RUN_ALL},
        everything=npm_server("everything"),
    )

    async with web_visitor(runtime) as visitor:
        events = await visitor.say("Show me the MCP logo.")

    assert (answer(events)["text"], answer(events)["status"]) == ("I could not see the logo.", "complete")
    assert [status for _, status in tool_steps(events)] == ["started"] * 3 + ["done"] * 3
    image, blob, gzip = results_sent(fake_openai).values()
    assert image == (
        "Here's the image you requested:\nThe image above is the MCP logo.\n"
        "[an image that could not be read (image/png, 4 KB): its bytes are not an image Chorus can decode]"
    )
    # The blob's text holds the time it was made: its size varies by a byte or two.
    assert re.fullmatch(
        r"Returning resource reference for Resource 2:\n"
        r"\[resource demo://resource/dynamic/blob/2 \(text/plain, \d+ B\), which Chorus cannot pass on\]\n"
        r"You can access this resource using the URI: demo://resource/dynamic/blob/2",
        blob,
    ), blob
    assert gzip.startswith("[resource demo://resource/session/hello.gz (application/gzip, 25 B)")
    assert image_parts(fake_openai) == []
    rows = runtime.stores.messages.messages(visitor.session_id)
    assert [row.attachment_count for row in rows if row.kind == "tool_result"] == [0, 0, 0]
    no_tracebacks(caplog)
    warned = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("get-tiny-image: image 1 (image/png) left out" in message for message in warned)


async def test_audio_binary_oversized_lying_and_unknown_media_from_the_filesystem_server_are_placeholders(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    folder = media_folder(tmp_path)
    fake_openai.script(
        reads(folder, "voice.wav", "data.bin", "noise.png", "photo.png", "bitmap.bmp"), "None of it shows."
    )
    runtime = await started_runtime(
        runtimes,
        tmp_path,
        fake_openai,
        {"model_vision": True, "limits_max_upload_bytes": SMALL_LIMIT},
        fs=npm_server("filesystem", str(folder)),
    )

    async with web_visitor(runtime) as visitor:
        events = await visitor.say("Read my media files.")

    assert answer(events)["text"] == "None of it shows."
    voice, data, noise, photo, bitmap = results_sent(fake_openai).values()

    def unreadable(name: str, mime_type: str, why: str) -> str:
        size = format_size(len((folder / name).read_bytes()))
        return f"[an image that could not be read ({mime_type}, {size}): {why}]"

    assert voice == f"[audio (audio/wav, {format_size(len(silence()))}), which Chorus cannot pass on]"
    assert data == (
        f"[resource {(folder / 'data.bin').as_uri()} (application/octet-stream, 200 B), "
        "which Chorus cannot pass on]"
    )
    assert noise == unreadable("noise.png", "image/png", "it is larger than the 4 KB an image may have")
    lying = "it says it is image/png, but its bytes are image/jpeg"
    assert photo == unreadable("photo.png", "image/png", lying)
    assert bitmap == unreadable(
        "bitmap.bmp", "image/bmp", "it is not in a format Chorus reads (PNG, JPEG, GIF, WebP)"
    )
    assert image_parts(fake_openai) == []
    assert "base64" not in json.dumps(results_sent(fake_openai))
    no_tracebacks(caplog)


@pytest.mark.parametrize("vision", [True, False])
async def test_an_image_the_filesystem_server_reads_is_an_image_part_or_a_placeholder_never_base64_text(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path, vision: bool
) -> None:
    """`read_media_file` sends the image twice: as content and inside its structured content."""
    folder = media_folder(tmp_path)
    fake_openai.script(reads(folder, "dot.png"), "A red dot.")
    runtime = await started_runtime(
        runtimes, tmp_path, fake_openai, {"model_vision": vision}, fs=npm_server("filesystem", str(folder))
    )

    async with web_visitor(runtime) as visitor:
        events = await visitor.say("What is in dot.png?")

    assert answer(events)["text"] == "A red dot."
    (result,) = results_sent(fake_openai).values()
    assert PNG_IN_BASE64 not in json.dumps(chat_requests(fake_openai)[-1])
    if vision:
        assert result == ""
        (image,) = image_parts(fake_openai)
        assert image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    else:
        assert result == f"[image: fs__read_media_file-1, image/png, {format_size(len(png(2, 2)))}]"
        assert image_parts(fake_openai) == []
    rows = runtime.stores.messages.messages(visitor.session_id)
    assert [row.attachment_count for row in rows if row.kind == "tool_result"] == [1]


def progress_events(events: list[Event]) -> list[dict[str, Any]]:
    return [event.data for event in events if event.name == "tool" and event.data["status"] == "progress"]


async def test_the_web_api_streams_the_progress_a_long_running_call_reports(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(ToolCalls([(LONG_RUNNING, {"duration": 2, "steps": 4})]), "Done.")
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, everything=npm_server("everything"))

    async with web_visitor(runtime) as visitor:
        events = await visitor.say("Run the long operation.")
        schema = documented((await visitor.client.get("/openapi.json")).json(), "ToolEvent")

    steps = tool_steps(events)
    assert steps[0] == (LONG_RUNNING, "started") and steps[-1] == (LONG_RUNNING, "done")
    shown = progress_events(events)
    assert shown and [event["progress"] for event in shown] == sorted(event["progress"] for event in shown)
    assert {event["progress"] for event in shown} <= {"1/4", "2/4", "3/4", "4/4"}
    assert shown[-1]["line"] == f"🔧 {LONG_RUNNING}: 2 · {shown[-1]['progress']}"
    for event in events:
        if event.name == "tool":
            assert_documented(event, schema)
    assert answer(events)["text"] == "Done."


async def test_a_telegram_draft_shows_the_progress_within_its_edit_interval(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(ToolCalls([(LONG_RUNNING, {"duration": 4, "steps": 8})]), "Done.")
    async with telegram_lane(runtimes, tmp_path, fake_openai, everything=npm_server("everything")) as (
        bot_api,
        _,
    ):
        bot_api.push(private_text(601, "Run the long operation."))
        await bot_api.wait_for(lambda: bot_api.sent_texts(601) == ["Ada\nDone."], timeout=READY_SECONDS)

    [draft] = bot_api.drafts(601)
    progress = [shown.text for shown in draft.history if " · " in shown.text]
    assert progress and all(text.startswith(f"Ada\n🔧 {LONG_RUNNING}: 4 · ") for text in progress)
    assert {text.rsplit(" · ", 1)[1] for text in progress} <= {f"{step}/8" for step in range(1, 9)}
    # Eight reports in four seconds, shown no faster than the lane's one draft a second (a call
    # may arrive late on a loaded machine, so the count is bounded, not each gap).
    times = [call.at for call in bot_api.calls_to("sendMessageDraft")]
    assert len(times) - 1 <= times[-1] - times[0] + 1


async def test_the_terminal_prints_a_line_for_each_progress_report(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(ToolCalls([(LONG_RUNNING, {"duration": 1, "steps": 2})]), "Done.")
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, everything=npm_server("everything"))
    screen = io.StringIO()

    await chat_loop(runtime.engine, user="ada", stdin=io.StringIO("Run the long operation.\n"), stdout=screen)

    call_line = f"  🔧 {LONG_RUNNING}: 1"
    # The last report may come with the result, whose end is shown rather than its progress.
    assert f"{call_line}\n{call_line} · 1/2\n" in screen.getvalue()
    assert "\nbot › Done." in screen.getvalue()
