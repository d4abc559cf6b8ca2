"""Failover: a provider that asks the next key, then the next endpoint, when one cannot answer.

Each (endpoint, key) pair is a provider of its own. A failure before anything of the
answer arrived that another key or endpoint could fix (`ProviderError.failover_reason`:
429, 402, 5xx, a refused connection, a timeout) moves the request on; the key that failed
rests (`Retry-After`, else the cooldown) while others exist. Once the answer has started
nothing moves: a broken stream stays `StreamInterrupted`. The answering model is named
with a `Served` event before the answer; keys are never logged, only their position.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bot.errors import ConfigError, ContextOverflowError, ProviderError, ProviderUnavailable
from bot.metrics import MODEL_FAILOVERS
from bot.providers.anthropic_messages import DEFAULT_BASE_URL as ANTHROPIC_URL
from bot.providers.base import ChatProvider, ChatRequest, ModelEvent, Served, collect_text
from bot.providers.openai import OpenAICompatibleProvider

if TYPE_CHECKING:
    from bot.config import EndpointSettings, ModelChoiceSettings, ModelSettings

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass
class Target:
    """One key of one endpoint: where a request may go, and until when it rests."""

    label: str  # names the endpoint and the key's position, never the key
    kind: str
    provider: ChatProvider
    model: str | None = None  # None: the model the request names
    resting_until: float = 0.0


class ModelRouter:
    """Tries a request's targets in order: its endpoint's keys, then the fallbacks' keys."""

    def __init__(
        self,
        main: Sequence[Target],
        *,
        fallbacks: Sequence[Target] = (),
        by_model: dict[str, Sequence[Target]] | None = None,
        cooldown_seconds: float = 30.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if not main:
            raise ValueError("a router needs at least one target")
        self.name = main[0].kind
        self._main = list(main)
        self._fallbacks = list(fallbacks)
        # Models (`models:` entries) served by an endpoint of their own.
        self._by_model = {model: list(targets) for model, targets in (by_model or {}).items()}
        self._cooldown = cooldown_seconds
        self._clock = clock

    def targets_for(self, model: str) -> list[Target]:
        return [*self._by_model.get(model, self._main), *self._fallbacks]

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        targets = self.targets_for(request.model)
        now = self._clock()
        ready = [target for target in targets if target.resting_until <= now]
        if not ready:
            wait = min(target.resting_until for target in targets) - now
            raise ProviderUnavailable(
                "The model is busy right now (every endpoint is rate limited). "
                f"Try again in {wait:.0f} seconds.",
                reason="rate_limited",
                retry_after=wait,
            )
        for position, target in enumerate(ready):
            asked = replace(request, model=target.model or request.model)
            started = False
            try:
                async with aclosing(target.provider.stream(asked)) as events:
                    async for event in events:
                        if not started:
                            started = True
                            yield Served(asked.model, target.kind)
                        yield event
                return
            except ProviderError as error:
                if isinstance(error, ContextOverflowError) and error.model is None:
                    # The window the error names is this model's, not the one the request named.
                    error.model = asked.model
                reason = error.failover_reason
                if started or reason is None or position == len(ready) - 1:
                    self._rest(target, error, targets)
                    raise
                self._rest(target, error, targets)
                MODEL_FAILOVERS.labels(reason).inc()
                log.warning(
                    "model endpoint %s could not answer (%s: %s); trying %s",
                    target.label,
                    reason,
                    error,
                    ready[position + 1].label,
                )

    async def complete(self, request: ChatRequest) -> str:
        return await collect_text(self.stream(request))

    def accepts_tools(self, model: str) -> bool:
        first = self.targets_for(model)[0]
        return first.provider.accepts_tools(first.model or model)

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        """What any endpoint that may answer `model` goes without."""
        targets = self.targets_for(model)
        named = {
            name for target in targets for name in target.provider.left_out_settings(target.model or model)
        }
        return tuple(sorted(named))

    async def discover_window(self, model: str) -> int | None:
        """The window the model's own endpoint states: a fallback's named model is asked at the
        fallback's endpoint."""
        named = [target for target in self._fallbacks if target.model == model]
        serving = named[0] if named else self.targets_for(model)[0]
        return await serving.provider.discover_window(serving.model or model)

    async def aclose(self) -> None:
        targets = [*self._main, *self._fallbacks, *(t for own in self._by_model.values() for t in own)]
        for provider in {id(target.provider): target.provider for target in targets}.values():
            await provider.aclose()

    def _rest(self, target: Target, error: ProviderError, targets: list[Target]) -> None:
        """A key refused for rate or credit rests, unless it is the only one (its retries wait instead)."""
        if len(targets) > 1 and error.failover_reason in ("rate_limited", "payment"):
            wait = error.retry_after if error.retry_after is not None else self._cooldown
            target.resting_until = self._clock() + wait


def make_router(
    model: ModelSettings, choices: Sequence[ModelChoiceSettings] = (), **options: Any
) -> ModelRouter:
    """The router for the configured endpoints: `model` (its keys), the models with endpoints of
    their own, then `model.fallbacks`.

    Each provider retries on its own (`model.max_retries`) only when nothing else could
    answer: with alternatives a failure moves on at once. Endpoints of any provider kind
    mix: an Anthropic endpoint may fall back to an OpenAI-compatible one and back.
    """
    # Models (`models:` entries) served elsewhere than the main endpoint: their own URL or kind.
    elsewhere = [c for c in choices if c.base_url or c.provider != model.provider]
    alone = len(model.keys()) == 1 and not model.fallbacks and not elsewhere
    options = {
        "connect_timeout": model.connect_timeout,
        "read_timeout": model.read_timeout,
        "max_retries": model.max_retries if alone else 0,
        **options,
    }
    by_model: dict[str, Sequence[Target]] = {}
    for choice in elsewhere:
        keys = [choice.api_key.get_secret_value() if choice.api_key else None]
        url = endpoint_url(choice, f"models ({choice.name})")
        by_model[choice.model] = _targets(choice.provider, url, None, keys, options)
    fallbacks = [
        target
        for position, endpoint in enumerate(model.fallbacks)
        for target in _targets(
            endpoint.provider,
            endpoint_url(endpoint, f"model.fallbacks[{position}]"),
            endpoint.name or None,
            endpoint.keys(),
            options,
        )
    ]
    return ModelRouter(
        _targets(model.provider, endpoint_url(model, "model"), None, model.keys(), options),
        fallbacks=fallbacks,
        by_model=by_model,
        cooldown_seconds=model.cooldown_seconds,
    )


def endpoint_url(endpoint: EndpointSettings | ModelChoiceSettings, setting: str) -> str:
    """The endpoint's URL; Anthropic's own when an `anthropic` endpoint names none."""
    if endpoint.base_url and endpoint.base_url.strip():
        return endpoint.base_url.strip()
    if endpoint.provider == "anthropic":
        return ANTHROPIC_URL
    raise ConfigError(f"{setting}.base_url is needed for an OpenAI-compatible endpoint")


def _targets(
    kind: str, base_url: str, model: str | None, keys: list[str | None], options: dict[str, Any]
) -> list[Target]:
    # The host and port only: a URL may carry credentials (https://user:key@host/v1).
    parts = urlsplit(base_url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    where = host + (f" ({model})" if model else "")
    return [
        Target(
            label=f"{where} key {index} of {len(keys)}" if len(keys) > 1 else where,
            kind=kind,
            provider=provider_for(kind, base_url.strip(), key, options),
            model=model,
        )
        for index, key in enumerate(keys, start=1)
    ]


def provider_for(kind: str, base_url: str, key: str | None, options: dict[str, Any]) -> ChatProvider:
    if kind == "anthropic":
        # The SDK takes a second to import: only a deployment that speaks with Anthropic pays it.
        from bot.providers.anthropic import AnthropicProvider

        return AnthropicProvider(key, base_url=base_url, **options)
    if kind == "openai":
        return OpenAICompatibleProvider(base_url, key, **options)
    raise ConfigError(f"Model provider {kind!r} is not known; use 'openai' or 'anthropic'.")
