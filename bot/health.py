"""Lane health: each lane reports whether it is running, and why not; /healthz shows it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

LaneState = Literal["starting", "running", "down", "failed"]


@dataclass(frozen=True)
class LaneStatus:
    state: LaneState
    # Why the lane is not running, with what the operator can do about it.
    reason: str | None
    since: datetime


class LaneHealth:
    """The state each lane last reported, by lane name."""

    def __init__(self) -> None:
        self._lanes: dict[str, LaneStatus] = {}

    def starting(self, lane: str, reason: str | None = None) -> None:
        """Not serving yet: connecting, or retrying an unreachable platform (`reason`)."""
        self._set(lane, "starting", reason)

    def running(self, lane: str) -> None:
        self._set(lane, "running", None)

    def down(self, lane: str, reason: str) -> None:
        """Not serving for now: its connection failed and it is reconnecting (`reason` says when).

        Unlike `failed` this needs no operator, so /healthz still answers 200."""
        self._set(lane, "down", reason)

    def failed(self, lane: str, reason: str) -> None:
        """Stopped for good until the operator fixes `reason` and restarts."""
        self._set(lane, "failed", reason)

    def snapshot(self) -> dict[str, LaneStatus]:
        return dict(self._lanes)

    def any_failed(self) -> bool:
        return any(status.state == "failed" for status in self._lanes.values())

    def _set(self, lane: str, state: LaneState, reason: str | None) -> None:
        self._lanes[lane] = LaneStatus(state=state, reason=reason, since=datetime.now(UTC))
