"""Asking a model server how large a model's context window is, the way each server says it.

- vLLM: `GET /v1/models` → the model's `max_model_len`.
- OpenRouter: `GET /v1/models` → `context_length` (and `top_provider.context_length`).
- llama.cpp: `GET /props` (at the server's root) → `default_generation_settings.n_ctx`, the
  window a request really gets (its `/v1/models` meta holds only `n_ctx_train`, the window
  the model was trained with, which the server may not give).
- Ollama: `POST /api/show` → `num_ctx` in the model's parameters when the Modelfile sets it,
  else the server's default (4,096 tokens) bounded by the model's own `context_length`.

OpenAI itself and most hosted APIs say nothing; the caller then keeps its default and
the first overflow teaches the window (`bot.windows`). Every answer is checked: a window
that is not a positive integer is no answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

log = logging.getLogger(__name__)

# Ollama's window for a model whose Modelfile sets no num_ctx (ollama/ollama, envconfig).
OLLAMA_DEFAULT_NUM_CTX = 4096
DISCOVERY_TIMEOUT_SECONDS = 5.0


async def discover_window(
    client: httpx.AsyncClient, base_url: str, model: str, headers: Mapping[str, str]
) -> int | None:
    """The window the server at `base_url` (an OpenAI-style `…/v1` address) states for `model`."""
    root = server_root(base_url)
    for ask in (_from_models, _from_props, _from_ollama):
        try:
            window = await ask(client, base_url, root, model, headers)
        except (httpx.HTTPError, ValueError) as error:
            log.debug("window discovery: %s for %s: %s", ask.__name__, model, error)
            continue
        if window is not None:
            return window
    return None


def server_root(base_url: str) -> str:
    """The server's own address: `base_url` without a trailing `/v1` (where /props and /api live)."""
    trimmed = base_url.rstrip("/")
    return trimmed[: -len("/v1")] if trimmed.endswith("/v1") else trimmed


async def _from_models(
    client: httpx.AsyncClient, base_url: str, root: str, model: str, headers: Mapping[str, str]
) -> int | None:
    response = await client.get(
        base_url.rstrip("/") + "/models", headers=dict(headers), timeout=DISCOVERY_TIMEOUT_SECONDS
    )
    if response.status_code != 200:
        return None
    payload = response.json()
    entries = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and model in (entry.get("id"), *(entry.get("aliases") or ())):
            return _models_entry_window(entry)
    return None


def _models_entry_window(entry: Mapping[str, Any]) -> int | None:
    top_provider = entry.get("top_provider")
    meta = entry.get("meta")
    candidates = (
        entry.get("max_model_len"),
        entry.get("context_length"),
        top_provider.get("context_length") if isinstance(top_provider, dict) else None,
        entry.get("context_window"),
        meta.get("n_ctx") if isinstance(meta, dict) else None,
    )
    return next((window for value in candidates if (window := positive(value)) is not None), None)


async def _from_props(
    client: httpx.AsyncClient, base_url: str, root: str, model: str, headers: Mapping[str, str]
) -> int | None:
    response = await client.get(root + "/props", headers=dict(headers), timeout=DISCOVERY_TIMEOUT_SECONDS)
    if response.status_code != 200:
        return None
    payload = response.json()
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    stated = settings.get("n_ctx") if isinstance(settings, dict) else None
    return positive(stated) or positive(payload.get("n_ctx"))


async def _from_ollama(
    client: httpx.AsyncClient, base_url: str, root: str, model: str, headers: Mapping[str, str]
) -> int | None:
    response = await client.post(
        root + "/api/show", json={"model": model}, headers=dict(headers), timeout=DISCOVERY_TIMEOUT_SECONDS
    )
    if response.status_code != 200:
        return None
    payload = response.json()
    if not isinstance(payload, dict):
        return None
    parameters = payload.get("parameters")
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            name, _, value = line.strip().partition(" ")
            if name == "num_ctx" and (window := positive(value.strip())) is not None:
                return window
    info = payload.get("model_info")
    if not isinstance(info, dict):
        return None
    trained = next(
        (
            window
            for key, value in info.items()
            if key.endswith(".context_length") and (window := positive(value))
        ),
        None,
    )
    return min(OLLAMA_DEFAULT_NUM_CTX, trained) if trained is not None else None


def positive(value: object) -> int | None:
    """`value` as a window: a positive integer (or its digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return None
