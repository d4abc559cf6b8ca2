"""What a model server's failed answer says, and how long to wait before asking again.

Shared by the chat providers and the speech service: the same error bodies, the same
`Retry-After`, the same backoff, the same failure another attempt may fix.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from bot.backoff import backoff_delay as backoff_delay  # where the providers and speech read it


class RetryableFailure(Exception):
    """A failure another attempt may fix; becomes a public error once retries run out."""

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
