"""The limits every lane shares: how much stored history one turn may bring in.

`CONTEXT_COUNT` is the one source of truth for the number of stored messages a
turn reads; lanes, the engine and the store import it, never a copy of it.
"""

from __future__ import annotations

import logging
import os

DEFAULT_CONTEXT_COUNT = 20
CONTEXT_COUNT_VARIABLE = "CHORUS_CONTEXT_COUNT"

_log = logging.getLogger(__name__)


def _context_count_from_environment() -> int:
    raw = os.environ.get(CONTEXT_COUNT_VARIABLE)
    if raw is None:
        return DEFAULT_CONTEXT_COUNT
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        # A bad setting must not stop the bot; say so once, at import.
        _log.warning(
            "%s=%r is not a positive integer; using %d",
            CONTEXT_COUNT_VARIABLE,
            raw,
            DEFAULT_CONTEXT_COUNT,
        )
        return DEFAULT_CONTEXT_COUNT
    return value


# Read once per process so every lane sees the same number for its whole life.
CONTEXT_COUNT = _context_count_from_environment()
