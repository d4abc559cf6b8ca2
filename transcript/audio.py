"""How voice notes and audio files reach the model: their transcript, or a placeholder with the duration."""

from __future__ import annotations

from transcript.rows import AUDIO_KINDS, AttachmentRef


def format_duration(seconds: float) -> str:
    """A duration as a player shows it: 0:07, 3:12, 1:02:03."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def audio_label(audio: AttachmentRef) -> str:
    """What the recording is called where it appears: `voice message, 0:07`, `audio: talk.mp3, 3:12`."""
    if audio.kind == "voice":
        # A round video message (Telegram) is heard like a voice note; the model knows which it was.
        name = "video message" if audio.mime_type.startswith("video/") else "voice message"
    else:
        name = f"audio: {audio.filename}"
    if audio.duration_seconds is None:
        return name
    return f"{name}, {format_duration(audio.duration_seconds)}"


def render_audio(audio: AttachmentRef) -> str:
    """`[voice message, 0:07] what was said`; without a transcript, the duration and why.

    The text is the same on every turn and every lane: it depends only on what is stored.
    """
    label = audio_label(audio)
    if audio.text is None:
        return f"[{label}; not transcribed, its words are not available]"
    heard = " ".join(audio.text.split())
    if not heard:
        return f"[{label}; no speech in it]"
    return f"[{label}] {heard}"


def is_audio(attachment: AttachmentRef) -> bool:
    return attachment.kind in AUDIO_KINDS
