"""Audio decoded and measured by the system's ffmpeg, never by hand.

Every voice note is decoded once at arrival into 16 kHz mono PCM: that checks it is audio,
measures its real length (a file's own header may lie) and is what speech-to-text servers
accept everywhere (whisper.cpp's server takes nothing else without `--convert`). ffmpeg runs
as a child process, so a hostile file can crash or stall only that process: it may read only
the one file (no playlists, no network), only the demuxers of the formats people send, no
single allocation above `MAX_ALLOCATION`, for at most `DECODE_TIMEOUT` seconds, and its
output stops at the length limit, which bounds what Chorus holds in memory.
"""

from __future__ import annotations

import io
import logging
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bot.errors import AudioTooLong, AudioUnavailable, AudioUnreadable
from transcript.audio import format_duration

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
SAMPLE_BYTES = 2  # signed 16-bit, mono
# The containers people send voice notes and audio in: Ogg (Opus, Vorbis), MP3, MP4/M4A
# (and Telegram's round videos), Matroska/WebM (browsers' recordings), WAV, FLAC, ADTS AAC.
DEMUXERS = "ogg,mp3,mov,matroska,webm,wav,flac,aac"
MAX_ALLOCATION = 256 * 1024 * 1024
DECODE_TIMEOUT = 60.0
# Opus at this rate is what Telegram's own apps record voice notes with, near enough.
VOICE_NOTE_BITRATE = "32k"

OutputFormat = Literal["ogg_opus", "mp3"]
_ENCODERS: dict[OutputFormat, list[str]] = {
    "ogg_opus": ["-c:a", "libopus", "-b:a", VOICE_NOTE_BITRATE, "-ac", "1", "-f", "ogg"],
    "mp3": ["-c:a", "libmp3lame", "-q:a", "5", "-f", "mp3"],
}


@dataclass(frozen=True)
class DecodedAudio:
    """16 kHz mono signed 16-bit PCM, as decoded."""

    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / (SAMPLE_RATE * SAMPLE_BYTES)

    def wav(self) -> bytes:
        """The PCM in a WAV container, the format every transcription server reads."""
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(SAMPLE_BYTES)
            out.setframerate(SAMPLE_RATE)
            out.writeframes(self.pcm)
        return buffer.getvalue()


def ffmpeg_path() -> str:
    found = shutil.which("ffmpeg")
    if found is None:
        raise AudioUnavailable()
    return found


def decode(path: Path, filename: str, max_seconds: float) -> DecodedAudio:
    """The first audio stream of the file at `path`, decoded; refuses what is not audio or too long."""
    limit = max_seconds + 1
    result = _run_ffmpeg(
        [
            *_input(path),
            *("-map", "0:a:0", "-vn", "-sn", "-dn"),
            *("-t", f"{limit:g}", "-ac", "1", "-ar", str(SAMPLE_RATE), "-f", "s16le", "-"),
        ],
        filename,
    )
    decoded = DecodedAudio(result)
    if not decoded.pcm:
        log.info("no audio samples in %s", filename)
        raise AudioUnreadable(filename)
    if decoded.seconds > max_seconds:
        raise AudioTooLong(filename, format_duration(max_seconds))
    return decoded


def decode_bytes(data: bytes, filename: str, max_seconds: float) -> DecodedAudio:
    with _spooled(data) as path:
        return decode(path, filename, max_seconds)


def encode(data: bytes, target: OutputFormat, filename: str = "speech") -> bytes:
    """Audio (any format ffmpeg reads of `DEMUXERS`) re-encoded as `target`."""
    with _spooled(data) as path:
        return _run_ffmpeg([*_input(path), "-map", "0:a:0", "-vn", *_ENCODERS[target], "-"], filename)


def container_of(data: bytes) -> OutputFormat | None:
    """Which of the formats Chorus sends these bytes already are, from their first bytes."""
    if data.startswith(b"OggS") and b"OpusHead" in data[:64]:
        return "ogg_opus"
    # An MPEG audio frame header: 11 sync bits, then layer III (ADTS AAC has layer 0).
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE6 == 0xE2):
        return "mp3"
    return None


def _input(path: Path) -> list[str]:
    return [
        *("-protocol_whitelist", "file", "-format_whitelist", DEMUXERS),
        *("-max_alloc", str(MAX_ALLOCATION), "-threads", "1", "-i", str(path)),
    ]


def _run_ffmpeg(arguments: list[str], filename: str) -> bytes:
    command = [ffmpeg_path(), "-nostdin", "-hide_banner", "-loglevel", "error", *arguments]
    try:
        result = subprocess.run(command, capture_output=True, timeout=DECODE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as error:
        log.warning("ffmpeg took over %g s on %s; refused", DECODE_TIMEOUT, filename)
        raise AudioUnreadable(filename) from error
    if result.returncode != 0:
        reason = result.stderr.decode("utf-8", errors="replace").strip().splitlines()
        log.info("ffmpeg could not read %s: %s", filename, (reason[-1] if reason else "no reason")[:200])
        raise AudioUnreadable(filename)
    return result.stdout


@contextmanager
def _spooled(data: bytes) -> Iterator[Path]:
    """`data` in a temporary file for ffmpeg (MP4 needs a file it can seek in, not a pipe)."""
    with tempfile.TemporaryDirectory(prefix="chorus-audio-") as directory:
        path = Path(directory) / "input"
        path.write_bytes(data)
        yield path
