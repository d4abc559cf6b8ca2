"""One hierarchy for every failure Chorus reports.

Each error carries a message a user or an operator can act on; the engine turns
any `ChorusError` into a clear reply and never lets one drop a stored message.
"""

from __future__ import annotations

from dataclasses import dataclass


class ChorusError(Exception):
    """Base class: `str(error)` is safe to show to the person chatting."""


def error_line(error: BaseException) -> str:
    """An error as one log line: its message without line breaks or a closing full stop, or its
    class when it has no message."""
    return " ".join(str(error).split()).rstrip(".") or type(error).__name__


class ConfigError(ChorusError):
    """The configuration is invalid; the message names the setting."""


# --- bad input -------------------------------------------------------------


class InputError(ChorusError):
    """The message or attachment a person sent cannot be accepted."""


class EmptyMessage(InputError):
    def __init__(self) -> None:
        super().__init__("Your message was empty — send some text or an attachment.")


class MessageTooLong(InputError):
    def __init__(self, length: int, limit: int) -> None:
        super().__init__(
            f"Your message is {length:,} characters; the limit is {limit:,}. "
            "Please shorten it or send it as a document."
        )


class AttachmentError(InputError):
    """An attachment could not be stored or read."""


class UnsupportedAttachment(AttachmentError):
    def __init__(self, filename: str, mime_type: str, accepted: str) -> None:
        super().__init__(f"I can't read '{filename}' ({mime_type}). Send {accepted}.")


class ImageTooLarge(AttachmentError):
    """An image whose pixel count alone would take too much memory to decode."""

    def __init__(self, filename: str, limit: int, size: tuple[int, int] | None) -> None:
        measured = f"is {size[0]:,}×{size[1]:,} pixels" if size is not None else "has far too many pixels"
        super().__init__(
            f"'{filename}' {measured}; the limit is {limit / 1e6:.0f} megapixels. Send a smaller image."
        )


class AttachmentTooLarge(AttachmentError):
    def __init__(self, filename: str, size: int, limit: int) -> None:
        shown_size, shown_limit = file_sizes(size, limit)
        super().__init__(f"'{filename}' is {shown_size}; the limit is {shown_limit}.")


def file_sizes(size: int, limit: int) -> tuple[str, str]:
    """Two byte counts in MB with just enough decimals to tell them apart ("10.5 MB", "10 MB")."""
    for decimals in (1, 2, 3):
        shown = tuple(_megabytes(count, decimals) for count in (size, limit))
        if shown[0] != shown[1]:
            return shown[0], shown[1]
    return f"{size:,} bytes", f"{limit:,} bytes"


def _megabytes(count: int, decimals: int) -> str:
    return f"{count / 1_048_576:.{decimals}f}".rstrip("0").rstrip(".") + " MB"


class CorruptDocument(AttachmentError):
    def __init__(self, filename: str) -> None:
        super().__init__(f"'{filename}' looks damaged — I could not read any text from it.")


class AudioUnreadable(AttachmentError):
    """A file sent as audio that ffmpeg cannot decode (damaged, hostile, or not audio at all)."""

    def __init__(self, filename: str) -> None:
        super().__init__(
            f"I couldn't play '{filename}': it is not audio I can decode, or it is damaged. "
            "Send an OGG/Opus, MP3, M4A, WAV, WebM or FLAC file."
        )


class AudioTooLong(AttachmentError):
    """Longer than `limits.audio_max_seconds`; durations come as a player shows them (3:12)."""

    def __init__(self, filename: str, limit: str, length: str | None = None) -> None:
        measured = f"is {length} long" if length else f"runs past {limit}"
        super().__init__(
            f"'{filename}' {measured}; the longest recording I take is {limit}. "
            "Send a shorter one, or split it."
        )


class AudioUnavailable(AttachmentError):
    """This server has no ffmpeg, so it cannot take audio at all."""

    def __init__(self) -> None:
        super().__init__(
            "This server can't take audio yet (ffmpeg is not installed). Send text instead; "
            "an operator can install ffmpeg (apt install ffmpeg)."
        )


class TranscriptFileError(InputError):
    """A file given to `chorus import` is not a readable Chorus transcript export."""


class UnknownPersona(InputError):
    def __init__(self, persona_id: str, known: list[str]) -> None:
        super().__init__(f"There is no persona '{persona_id}'. Available: {', '.join(known)}.")


class SnipRangeError(InputError):
    """A snip names messages the conversation does not have."""


class LinkCodeError(InputError):
    """A link code was wrong, expired or already used."""


class CommandUnavailable(ChorusError):
    """A command needs a part of the runtime this process does not run."""


class NotFound(ChorusError, LookupError):
    """The session, attachment or item asked for does not exist."""


# --- storage, tools, delivery ----------------------------------------------


class StorageConflict(ChorusError):
    """Another writer got there first (a message already stored, a cursor already moved)."""


class ToolError(ChorusError):
    """A tool could not be offered or run; the message becomes what the model reads."""


class DeliveryRefused(ChorusError):
    """The platform did not take the message; `str()` is the reason recorded on the reminder."""

    def __init__(self, reason: str, *, retry_after: float | None = None, permanent: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.permanent = permanent


class LaneError(ChorusError):
    """A platform refused or lost something a lane sent (a draft deleted, a message gone)."""


# --- the model provider ----------------------------------------------------


class ProviderError(ChorusError):
    """The model provider failed; the person's message stays stored.

    `failover_reason` says why another key or endpoint could answer instead
    ("rate_limited", "payment", "server_error", "timeout", "unreachable"); None when
    none could (the request itself is at fault). `retry_after` is the server's wait, if it named one.
    """

    failover_reason: str | None = None
    retry_after: float | None = None


class ProviderUnavailable(ProviderError):
    """Timeouts, connection failures, 429 or 5xx answers after all retries."""

    def __init__(
        self, message: str, *, reason: str = "unreachable", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.failover_reason = reason
        self.retry_after = retry_after


class ProviderRejected(ProviderError):
    """The provider refused the request (4xx other than overflow and 429).

    Out of credit (402, a 429 for `insufficient_quota`) is the key's state, not the
    request's: `failover_reason` "payment" lets another key or endpoint answer.
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.failover_reason = reason


class ProviderProtocolError(ProviderError):
    """The provider answered with something that is not a valid stream."""


@dataclass(frozen=True)
class OverflowNumbers:
    """What an overflow error said: the model's window and the request's size, when it said them.

    Both are in the server's own tokens. `window` is the whole context (prompt and reply).
    """

    window: int | None = None
    requested: int | None = None


class ContextOverflowError(ProviderError):
    """The request was too large for the model's context window; `numbers` as the server gave them.

    `model`: the model that refused, when a fallback answered for the one the request named.
    """

    def __init__(
        self, message: str, numbers: OverflowNumbers | None = None, model: str | None = None
    ) -> None:
        super().__init__(message)
        self.numbers = numbers or OverflowNumbers()
        self.model = model


class RetryableFailure(ChorusError):
    """A model or speech server's failure another attempt may fix; becomes a public error
    (`ProviderUnavailable`, `SpeechUnavailable`) once retries run out."""

    def __init__(
        self, reason: str, *, busy: bool, retry_after: float | None = None, kind: str = "unreachable"
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.busy = busy
        self.retry_after = retry_after
        # The failover reason it becomes (`ProviderError.failover_reason`).
        self.kind = kind

    def unavailable_message(self) -> str:
        state = "busy" if self.busy else "unreachable"
        return f"The model is {state} right now ({self.reason}). Try again in a minute."


class SpeechError(ChorusError):
    """The speech service (speech-to-text or text-to-speech) failed; nothing stored is lost."""


class SpeechUnavailable(SpeechError):
    """Timeouts, connection failures or 5xx answers of the speech service after all retries."""


class SpeechRejected(SpeechError):
    """The speech service refused the request (4xx other than 429)."""


class StreamInterrupted(ProviderError):
    """The reply stream broke after some text had arrived."""

    def __init__(self, message: str, partial_text: str) -> None:
        super().__init__(message)
        self.partial_text = partial_text
