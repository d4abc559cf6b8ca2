"""The lanes the runtime can run, as each registers itself: its name, settings model and build.

Lanes depend on the runtime, never the other way: the built-in lanes register here as
their package loads (`channels.registry`; an installation adds its own the same way), and
the runtime reads what is registered — `bot.config` builds the settings' `channels` section
from it, the console lists the lanes, `chorus serve` builds the active ones. A lane's
settings model and package are named by dotted paths and loaded only when used, so
registering a lane loads no platform library.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel


class LaneSettings(BaseModel):
    """Base of every lane's settings model."""

    def is_active(self) -> bool:
        """Whether `chorus serve` runs this lane with these settings."""
        raise NotImplementedError


class LaneRunner(Protocol):
    """A built lane, as `chorus serve` drives it."""

    name: str

    def mount(self, app: Any) -> None:
        """Add the lane's HTTP routes (webhooks, pages) to the one web app, if it has any."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class LaneSpec:
    """One lane: its name, where its settings model and `build` live, its short env names."""

    name: str
    # "package.module:ClassName" of the lane's `LaneSettings` subclass.
    settings_path: str
    # The package whose `build(runtime) -> LaneRunner` makes the lane.
    package: str
    # Short environment names an operator expects, mapped to a field of the lane's settings.
    env_aliases: dict[str, str] = field(default_factory=dict)

    def settings_model(self) -> type[LaneSettings]:
        module_name, _, class_name = self.settings_path.partition(":")
        model = getattr(importlib.import_module(module_name), class_name)
        if not (isinstance(model, type) and issubclass(model, LaneSettings)):
            raise TypeError(f"{self.settings_path} is not a LaneSettings model")
        return model

    def build(self, runtime: Any) -> LaneRunner:
        """Import the lane (and its platform library) and build it on `runtime`."""
        runner: LaneRunner = importlib.import_module(self.package).build(runtime)
        return runner


_LANES: dict[str, LaneSpec] = {}


def register(spec: LaneSpec) -> None:
    if spec.name in _LANES:
        raise ValueError(f"lane {spec.name!r} registered twice")
    _LANES[spec.name] = spec


def register_all(specs: Iterable[LaneSpec]) -> None:
    for spec in specs:
        register(spec)


def lanes() -> list[LaneSpec]:
    """Every registered lane, in registration order (the order lanes are mounted and started)."""
    return list(_LANES.values())


def active_lanes(channels: BaseModel) -> list[LaneSpec]:
    """The lanes whose settings (in the `channels` section) say they run."""
    return [spec for spec in lanes() if _settings_of(channels, spec.name).is_active()]


def _settings_of(channels: BaseModel, name: str) -> LaneSettings:
    settings = getattr(channels, name)
    if not isinstance(settings, LaneSettings):
        raise TypeError(f"channels.{name} is not a lane's settings")
    return settings
