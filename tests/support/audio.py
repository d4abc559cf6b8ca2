"""Real audio files for tests, made by ffmpeg: tones in the containers people send.

voice_note(7)      # OGG/Opus, as Telegram and Discord record voice notes
audio_file(3)      # MP3
browser_recording(4)  # WebM/Opus, as Chromium's MediaRecorder makes it
round_video(4)     # MP4 with H.264 video and AAC sound, a Telegram video note
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

FORMATS = {
    "ogg": ["-c:a", "libopus", "-b:a", "24k", "-f", "ogg"],
    "mp3": ["-c:a", "libmp3lame", "-f", "mp3"],
    "webm": ["-c:a", "libopus", "-f", "webm"],
    "wav": ["-c:a", "pcm_s16le", "-f", "wav"],
}


def tone(seconds: float, container: str, frequency: int = 440) -> bytes:
    """A sine tone of `seconds` in `container` (a key of FORMATS)."""
    return _ffmpeg(
        [
            "-f",
            "lavfi",
            "-i",
            f"sine=frequency={frequency}:duration={seconds}",
            "-ac",
            "1",
            *FORMATS[container],
        ]
    )


def voice_note(seconds: float = 7, frequency: int = 440) -> bytes:
    return tone(seconds, "ogg", frequency)


def audio_file(seconds: float = 3) -> bytes:
    return tone(seconds, "mp3")


def browser_recording(seconds: float = 4) -> bytes:
    return tone(seconds, "webm")


def round_video(seconds: float = 4) -> bytes:
    """An MP4 round video with sound; MP4 needs a seekable output, so it goes through a file."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "note.mp4"
        _ffmpeg(
            [
                *("-f", "lavfi", "-i", f"testsrc=size=240x240:rate=10:duration={seconds}"),
                *("-f", "lavfi", "-i", f"sine=frequency=500:duration={seconds}"),
                *("-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-shortest", "-y", str(path)),
            ],
            to_stdout=False,
        )
        return path.read_bytes()


def silence(seconds: float, container: str = "ogg") -> bytes:
    """Silence compresses to almost nothing: a long recording in a small file."""
    return _ffmpeg(["-f", "lavfi", "-i", f"anullsrc=r=16000:cl=mono:d={seconds}", *FORMATS[container]])


def _ffmpeg(arguments: list[str], *, to_stdout: bool = True) -> bytes:
    command = ["ffmpeg", "-nostdin", "-v", "error", *arguments, *(["-"] if to_stdout else [])]
    return subprocess.run(command, capture_output=True, timeout=120, check=True).stdout
