"""A real OpenAI-compatible speech server on 127.0.0.1: transcriptions and speech, as OpenAI answers.

    async with FakeSpeech() as speech:
        speech.say("hello Ada")                     # the next transcription's text
        speech.fail_next(server_error(503))         # the next request (either endpoint) answers 503
        ...
        assert speech.transcriptions[0].fields["model"] == "whisper-1"

`POST /v1/audio/transcriptions` takes a multipart form the way OpenAI's API does: `file`
(required; decoded with ffmpeg, so anything that is not audio is a 400 "Invalid file
format"), `model` (required), `response_format` (json, text, verbose_json, srt, vtt),
`language`, `prompt`, `temperature`; more than 25 MB is a 413. `POST /v1/audio/speech`
takes JSON: `model`, `input` (required, at most 4096 characters), `voice` (one of OpenAI's),
`response_format` (mp3, opus, aac, flac, wav, pcm), `speed` (0.25–4); it answers with a
tone whose length grows with the input, encoded by ffmpeg in the format asked, unless
`only_wav` is set (as some local servers do, whatever is asked). Errors have OpenAI's body:
`{"error": {"message", "type", "param", "code"}}`. No speech is recognised for real: what a
recording "says" is scripted with `say`, else `default_text` of its measured seconds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
from aiohttp import BodyPartReader, web

from tests.fakes.openai_server import HttpError, _error_response
from tests.support.local_server import LocalServer

MAX_UPLOAD_BYTES = 25 * 1024 * 1024
SPEECH_INPUT_CHARS = 4096
VOICES = {"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse"}
RESPONSE_FORMATS = {"json", "text", "verbose_json", "srt", "vtt"}
# response_format → (ffmpeg output arguments, content type), as OpenAI labels them.
SPEECH_FORMATS: dict[str, tuple[list[str], str]] = {
    "mp3": (["-c:a", "libmp3lame", "-f", "mp3"], "audio/mpeg"),
    "opus": (["-c:a", "libopus", "-b:a", "32k", "-f", "ogg"], "audio/opus"),
    "aac": (["-c:a", "aac", "-f", "adts"], "audio/aac"),
    "flac": (["-c:a", "flac", "-f", "flac"], "audio/flac"),
    "wav": (["-c:a", "pcm_s16le", "-f", "wav"], "audio/wav"),
    "pcm": (["-c:a", "pcm_s16le", "-f", "s16le"], "audio/pcm"),
}
# How long the spoken tone lasts per character of input.
SECONDS_PER_CHAR = 0.02


@dataclass(frozen=True)
class Transcription:
    """One transcription request: its text fields, and the uploaded file as received."""

    fields: dict[str, str]
    filename: str
    content_type: str
    data: bytes
    seconds: float | None


@dataclass(frozen=True)
class SpeechRequest:
    body: dict[str, Any]


def invalid_request(message: str, param: str | None = None, code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return web.json_response(body, status=400)


def default_text(seconds: float) -> str:
    return f"a recording of {seconds:.1f} seconds"


class FakeSpeech(LocalServer):
    url_path = "/v1"

    def __init__(self) -> None:
        super().__init__()
        self.transcriptions: list[Transcription] = []
        self.speeches: list[SpeechRequest] = []
        self.default: Callable[[float], str] = default_text
        self.only_wav = False
        self._texts: deque[str] = deque()
        self._failures: deque[HttpError] = deque()

    def say(self, *texts: str) -> None:
        """What the next transcriptions hear, in order."""
        self._texts.extend(texts)

    def fail_next(self, *errors: HttpError) -> None:
        """The next requests (to either endpoint) answer with these errors, in order."""
        self._failures.extend(errors)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)

    async def _transcribe(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            return invalid_request("Could not parse multipart form")
        if request.content_length is not None and request.content_length > MAX_UPLOAD_BYTES:
            return web.json_response(
                {
                    "error": {
                        "message": "Maximum content size limit (26214400) exceeded",
                        "type": "server_error",
                    }
                },
                status=413,
            )
        fields: dict[str, str] = {}
        upload: tuple[str, str, bytes] | None = None
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader) or part.name is None:
                continue
            if part.filename is not None:
                upload = (part.filename, part.headers.get("Content-Type", ""), bytes(await part.read()))
            else:
                fields[part.name] = await part.text()
        seconds = await asyncio.to_thread(_seconds_of, upload[2]) if upload is not None else None
        if upload is not None:
            self.transcriptions.append(Transcription(fields, upload[0], upload[1], upload[2], seconds))
        if self._failures:
            return _error_response(self._failures.popleft())
        if upload is None:
            return invalid_request("you must provide a file", "file")
        if not fields.get("model"):
            return invalid_request("you must provide a model parameter", "model")
        response_format = fields.get("response_format", "json")
        if response_format not in RESPONSE_FORMATS:
            return invalid_request(f"Invalid response_format '{response_format}'", "response_format")
        if seconds is None:
            return invalid_request(
                "Invalid file format. Supported formats: "
                "['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']",
                code="invalid_value",
            )
        text = self._texts.popleft() if self._texts else self.default(seconds)
        return _transcription_response(text, seconds, response_format, fields.get("language"))

    async def _speak(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return invalid_request("We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return invalid_request("The body must be a JSON object.")
        self.speeches.append(SpeechRequest(body))
        if self._failures:
            return _error_response(self._failures.popleft())
        for name in ("model", "input", "voice"):
            if not body.get(name):
                return invalid_request(
                    f"Missing required parameter: '{name}'.", name, "missing_required_parameter"
                )
        text = str(body["input"])
        if len(text) > SPEECH_INPUT_CHARS:
            return invalid_request(
                f"'input' is too long: expected a string with maximum length {SPEECH_INPUT_CHARS}, "
                f"but got a string with length {len(text)} instead.",
                "input",
                "string_above_max_length",
            )
        if body["voice"] not in VOICES:
            return invalid_request(f"Invalid voice '{body['voice']}'.", "voice", "invalid_value")
        wanted = "wav" if self.only_wav else str(body.get("response_format", "mp3"))
        if wanted not in SPEECH_FORMATS:
            return invalid_request(f"Invalid response_format '{wanted}'.", "response_format", "invalid_value")
        speed = float(body.get("speed", 1.0))
        if not 0.25 <= speed <= 4.0:
            return invalid_request("speed must be between 0.25 and 4.0", "speed", "invalid_value")
        arguments, content_type = SPEECH_FORMATS[wanted]
        seconds = max(0.5, len(text) * SECONDS_PER_CHAR / speed)
        audio = await asyncio.to_thread(_tone, seconds, arguments)
        return web.Response(body=audio, content_type=content_type)


def _transcription_response(
    text: str, seconds: float, response_format: str, language: str | None
) -> web.Response:
    if response_format == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    if response_format == "verbose_json":
        segment = {"id": 0, "start": 0.0, "end": round(seconds, 2), "text": text}
        body = {"task": "transcribe", "language": language or "english", "duration": seconds, "text": text}
        return web.json_response({**body, "segments": [segment]})
    if response_format in ("srt", "vtt"):
        end = f"00:00:{min(seconds, 59.999):06.3f}"
        if response_format == "srt":
            return web.Response(
                text=f"1\n00:00:00,000 --> {end.replace('.', ',')}\n{text}\n", content_type="text/plain"
            )
        return web.Response(text=f"WEBVTT\n\n00:00:00.000 --> {end}\n{text}\n", content_type="text/vtt")
    return web.json_response({"text": text})


def _seconds_of(data: bytes) -> float | None:
    """The decoded length of an upload, or None when ffmpeg cannot decode it as audio."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "upload"
        path.write_bytes(data)
        result = subprocess.run(
            [
                "ffmpeg",
                "-nostdin",
                "-v",
                "error",
                "-i",
                str(path),
                "-map",
                "0:a:0",
                "-f",
                "s16le",
                "-ac",
                "1",
                "-ar",
                "16000",
                "-",
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
    if result.returncode != 0 or not result.stdout:
        return None
    return len(result.stdout) / 32_000


def _tone(seconds: float, arguments: list[str]) -> bytes:
    result = subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            f"sine=frequency=330:duration={seconds:.2f}",
            "-ac",
            "1",
            *arguments,
            "-",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    return result.stdout


# Named apart from the fixture so a test's `fake_speech` parameter never shadows the import.
@pytest_asyncio.fixture(name="fake_speech")
async def fake_speech_fixture() -> AsyncIterator[FakeSpeech]:
    async with FakeSpeech() as server:
        yield server
