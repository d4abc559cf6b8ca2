"""Asking a model server its window, as each server states it (bot/providers/discovery.py).

Each stand-in answers as the server's API reference shows: vLLM's `/v1/models` entry with
`max_model_len`, OpenRouter's with `context_length`, llama.cpp's `/props`, Ollama's
`/api/show`, and OpenAI's `/v1/models`, which states no window.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from aiohttp import web

from bot.providers.discovery import discover_window
from tests.support.local_server import LocalServer


class ModelServer(LocalServer):
    """Answers GET paths with the JSON given; everything else is 404."""

    url_path = "/v1"

    def __init__(self, answers: dict[str, Any]) -> None:
        super().__init__()
        self.answers = answers
        self.asked: list[str] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._answer)

    async def _answer(self, request: web.Request) -> web.Response:
        self.asked.append(f"{request.method} {request.path}")
        answer = self.answers.get(f"{request.method} {request.path}")
        if answer is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(answer)


VLLM = {
    "GET /v1/models": {"object": "list", "data": [{"id": "qwen", "object": "model", "max_model_len": 32768}]}
}
OPENROUTER = {
    "GET /v1/models": {
        "data": [{"id": "qwen", "context_length": 131072, "top_provider": {"context_length": 65536}}]
    }
}
LLAMA_CPP = {
    "GET /v1/models": {"object": "list", "data": [{"id": "qwen", "meta": {"n_ctx_train": 8192}}]},
    "GET /props": {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1},
}
OLLAMA_NUM_CTX = {
    "GET /v1/models": {"object": "list", "data": [{"id": "qwen", "object": "model"}]},
    "POST /api/show": {
        "parameters": "temperature 0.7\nnum_ctx                        16384",
        "model_info": {},
    },
}
OLLAMA_DEFAULT = {"POST /api/show": {"parameters": "", "model_info": {"qwen2.context_length": 32768}}}
OPENAI = {"GET /v1/models": {"object": "list", "data": [{"id": "qwen", "object": "model", "owned_by": "x"}]}}
LIES = {
    "GET /v1/models": {"data": [{"id": "qwen", "max_model_len": -1}]},
    "GET /props": {"default_generation_settings": {"n_ctx": "lots"}},
}


@pytest.mark.parametrize(
    ("answers", "window"),
    [
        (VLLM, 32768),
        (OPENROUTER, 131072),
        (LLAMA_CPP, 2048),
        (OLLAMA_NUM_CTX, 16384),
        (OLLAMA_DEFAULT, 4096),
        (OPENAI, None),
        (LIES, None),
    ],
    ids=["vllm", "openrouter", "llama.cpp", "ollama-num_ctx", "ollama-default", "openai", "lies"],
)
async def test_each_server_states_its_window_its_own_way(answers: dict[str, Any], window: int | None) -> None:
    async with ModelServer(answers) as server, httpx.AsyncClient() as client:
        assert await discover_window(client, server.base_url, "qwen", {}) == window


async def test_another_models_entry_is_not_this_models_window() -> None:
    async with ModelServer(VLLM) as server, httpx.AsyncClient() as client:
        assert await discover_window(client, server.base_url, "llama", {}) is None


async def test_a_server_that_is_gone_states_nothing() -> None:
    async with ModelServer({}) as server:
        base_url = server.base_url
    async with httpx.AsyncClient() as client:
        assert await discover_window(client, base_url, "qwen", {}) is None
