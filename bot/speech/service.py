"""The speech service: any server that speaks OpenAI's audio API (OpenAI, faster-whisper, whisper.cpp).

`POST {base_url}/audio/transcriptions` (multipart: the file, `model`, `response_format`,
optionally `language`) hears a recording; `POST {base_url}/audio/speech` (JSON: `model`,
`input`, `voice`, `response_format`) speaks a text. Failures follow the chat provider's
discipline: 408, 429, 5xx and connection failures are retried with backoff (`Retry-After`
honoured) and end in `SpeechUnavailable`; other refusals are `SpeechRejected` at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

import httpx

from bot.config import SpeechSettings
from bot.errors import ConfigError, RetryableFailure, SpeechError, SpeechRejected, SpeechUnavailable
from bot.providers.http_failures import error_details, retry_after_seconds
from bot.retries import RetryPolicy, retrying

log = logging.getLogger(__name__)

# OpenAI's `/audio/speech` takes at most this many characters of input per request.
SPEECH_INPUT_CHARS = 4096
SpeechFormat = Literal["opus", "mp3"]
_MESSAGE_LIMIT = 300


class SpeechService:
    """Speech-to-text and text-to-speech over one OpenAI-compatible base URL."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        stt_model: str = "whisper-1",
        tts_model: str = "tts-1",
        voice: str = "alloy",
        language: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        max_backoff: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"speech.base_url must start with http:// or https://, got {base_url!r}.")
        self.base_url = base_url.rstrip("/")
        self.stt_model = stt_model
        self.tts_model = tts_model
        self.voice = voice
        self.language = language
        self._retries = RetryPolicy(max_retries, backoff_base, max_backoff)
        self._read_timeout = read_timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout), headers=headers, transport=transport
        )

    @classmethod
    def from_settings(cls, settings: SpeechSettings) -> SpeechService | None:
        """The configured service, or None when `speech.base_url` is empty."""
        if not settings.base_url:
            return None
        return cls(
            settings.base_url,
            settings.api_key.get_secret_value() if settings.api_key else None,
            stt_model=settings.stt_model,
            tts_model=settings.tts_model,
            voice=settings.voice,
            language=settings.language,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            max_retries=settings.max_retries,
        )

    async def transcribe(self, wav: bytes, filename: str = "voice.wav") -> str:
        """What is said in a WAV recording; "" when the service heard no speech."""
        fields = {"model": self.stt_model, "response_format": "json"}
        if self.language:
            fields["language"] = self.language

        def send() -> httpx.Request:
            return self._client.build_request(
                "POST",
                f"{self.base_url}/audio/transcriptions",
                data=fields,
                files={"file": (filename, wav, "audio/wav")},
            )

        response = await self._send(send, "hear the voice note")
        return _transcript_of(response)

    async def synthesise(self, text: str, audio_format: SpeechFormat) -> bytes:
        """`text` (at most SPEECH_INPUT_CHARS) spoken, as the service encodes `audio_format`."""
        body = {"model": self.tts_model, "input": text, "voice": self.voice, "response_format": audio_format}

        def send() -> httpx.Request:
            return self._client.build_request("POST", f"{self.base_url}/audio/speech", json=body)

        response = await self._send(send, "speak the reply")
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        if not response.content or content_type in ("application/json", "text/html", "text/plain"):
            raise SpeechError(
                f"The speech service answered without audio ({content_type or 'an empty body'}); "
                "check speech.base_url and speech.tts_model."
            )
        return response.content

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _send(self, build: Callable[[], httpx.Request], doing: str) -> httpx.Response:
        def unavailable(failure: RetryableFailure) -> SpeechUnavailable:
            return SpeechUnavailable(
                f"The speech service could not {doing} ({failure.reason}). Try again later."
            )

        return await retrying(self._retries, lambda: self._attempt(build()), exhausted=unavailable)

    async def _attempt(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._client.send(request)
        except httpx.TransportError as error:
            raise RetryableFailure(self._describe(error), busy=False) from error
        if response.status_code < 400:
            return response
        try:
            payload: Any = response.json()
        except ValueError:
            payload = response.text
        message, _code = error_details(payload)
        message = (message or response.reason_phrase)[:_MESSAGE_LIMIT]
        status = response.status_code
        if status in (408, 429) or status >= 500:
            retry_after = retry_after_seconds(response.headers.get("Retry-After"))
            raise RetryableFailure(f"HTTP {status}", busy=True, retry_after=retry_after)
        raise SpeechRejected(f"The speech service refused the request (HTTP {status}): {message}")

    def _describe(self, error: httpx.TransportError) -> str:
        if isinstance(error, httpx.ReadTimeout):
            return f"no answer within {self._read_timeout:g} seconds"
        if isinstance(error, httpx.ConnectTimeout | httpx.ConnectError):
            return "could not connect"
        return "the connection dropped"


def _transcript_of(response: httpx.Response) -> str:
    """The `text` of a JSON answer; a server that answers in plain text is taken at its word."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip()
    if content_type != "application/json":
        return response.text.strip()
    try:
        payload = response.json()
    except ValueError as error:
        raise SpeechError("The speech service sent a transcript Chorus cannot read (not JSON).") from error
    text = payload.get("text") if isinstance(payload, dict) else None
    if not isinstance(text, str):
        raise SpeechError("The speech service sent a transcript without its `text`.")
    return text.strip()
