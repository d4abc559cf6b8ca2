"""Speaker names in the form OpenAI's `name` field accepts: `^[A-Za-z0-9_-]{1,64}$`."""

from __future__ import annotations

import functools
import hashlib
import re

MAX_NAME_LENGTH = 64
_DISALLOWED_RUN = re.compile(r"[^A-Za-z0-9_-]+")
_ALPHANUMERIC = re.compile(r"[A-Za-z0-9]")


@functools.lru_cache(maxsize=1024)
def sanitise_name(name: str) -> str:
    """Return `name` with every run of disallowed characters replaced by one `_`.

    Names with no ASCII letter or digit (such as "张三") would shrink to nothing
    or to bare underscores, so they get a fallback derived from a stable hash of
    the original: the same person keeps the same label on every turn and every
    process, and two such people are still told apart.
    """
    cleaned = _DISALLOWED_RUN.sub("_", name).strip("_")[:MAX_NAME_LENGTH].rstrip("_")
    if _ALPHANUMERIC.search(cleaned):
        return cleaned
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
    return f"name_{digest[:8]}"
