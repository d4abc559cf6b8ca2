"""The real model for these tests: llama.cpp's server on SmolLM2-135M (tests/support/llama_server.py).

One server for the whole session, at the tests' window of 1024 tokens; a test that needs
another window starts its own `LlamaServer`. Without xllamacpp or the model file the tests
skip, and under CI=true they fail (tests/support/peers.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.llama_server import LlamaServer, server_available
from tests.support.peers import REAL_MODEL
from tests.web.conftest import make_client  # noqa: F401  (the web lane's client factory)

TEST_WINDOW = 1024


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    if not server_available():
        REAL_MODEL.skip()
    with LlamaServer(n_ctx=TEST_WINDOW) as server:
        yield server


@pytest.fixture
def real_model(llama_server: LlamaServer) -> dict[str, Any]:
    """Settings overrides that point Chorus at the real server, with its window and short replies."""
    return {
        "model_base_url": llama_server.api_url,
        "model_name": "smollm2",
        "model_context_window": TEST_WINDOW,
        # Short replies keep each test to seconds on one thread.
        "model_reply_reserve_tokens": 48,
    }
