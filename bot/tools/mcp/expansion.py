"""`${NAME}` in a server's `env`, `headers` and `url`: read from the environment at start.

Secrets stay out of config.yaml: `Authorization: "Bearer ${GITHUB_TOKEN}"` is filled in
when the server starts, and every value filled in this way is masked in what Chorus
logs or shows about the server (`Secrets.mask`). `$${NAME}` writes a literal `${NAME}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bot.errors import ConfigError

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MASK = "***"


class Secrets:
    """The values filled in from the environment, to expand with and to mask."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._used: set[str] = set()

    def expand(self, text: str, where: str) -> str:
        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "$"
            value = self._environ.get(name)
            if value is None:
                raise ConfigError(f"{where} names ${{{name}}}, which is not set in the environment")
            if value:
                self._used.add(value)
            return value

        return _REFERENCE.sub(fill, text)

    def expand_all(self, values: Mapping[str, str], where: str) -> dict[str, str]:
        return {key: self.expand(value, f"{where}.{key}") for key, value in values.items()}

    def mask(self, text: str) -> str:
        """`text` with every filled-in value replaced, longest first (one may contain another)."""
        for value in sorted(self._used, key=len, reverse=True):
            text = text.replace(value, MASK)
        return text
