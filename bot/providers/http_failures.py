"""What a model server's failed answer says, and how long to wait before asking again.

Shared by the chat providers and the speech service: the same error bodies, the same
`Retry-After`, the same failure another attempt may fix (they retry through `bot.retries`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from bot.errors import ProviderUnavailable, RetryableFailure, StreamInterrupted


def unavailable(failure: RetryableFailure) -> ProviderUnavailable:
    """What a model call that failed on every attempt says to the person."""
    return ProviderUnavailable(
        failure.unavailable_message(), reason=failure.kind, retry_after=failure.retry_after
    )


def broke_off(failure: RetryableFailure, text: str) -> StreamInterrupted:
    """What a reply stream that failed after showing `text` says: it is not asked again."""
    return StreamInterrupted(f"The reply broke off ({failure.reason}). Try again for the rest.", text)


def error_details(payload: Any) -> tuple[str, str]:
    """The human message and the machine-readable code/type of an error body, as found."""
    if isinstance(payload, str):
        return payload.strip(), ""
    if not isinstance(payload, dict):
        return "", ""
    error = payload.get("error", payload)
    if isinstance(error, str):
        return error, ""
    if not isinstance(error, dict):
        return "", ""
    message = error.get("message") or error.get("detail") or ""
    code = " ".join(str(error[key]) for key in ("code", "type") if error.get(key) is not None)
    return str(message), code


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds from now; it may be a number or an HTTP date."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


# Where a refused key (HTTP 401) is set: said to the person, who may be the one who runs the bot.
KEY_HINT = (
    "Check the model's API key: it is set as model.api_key in config.yaml (the key, or "
    "${NAME} to read environment variable NAME) or as CHORUS_MODEL_API_KEY."
)


def refused_message(status: int | None, message: str) -> str:
    """What a person reads when the model server refused the request: whole sentences, and for a
    refused key (401) where the key is set."""
    said = message.strip().rstrip(".") or "no reason given"
    where = f" (HTTP {status})" if status is not None else ""
    text = f"The model provider refused the request{where}: {said}."
    return f"{text} {KEY_HINT}" if status == 401 else text
