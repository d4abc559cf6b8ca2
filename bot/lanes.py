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
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, Field

DmMode = Literal["open", "pairing", "allowlist"]
StrangerAudience = Literal["public", "members"]


class LaneAccess(BaseModel):
    """Who a lane's people are (`channels.<lane>.access`, docs/access.md)."""

    # Platform user ids of the owner and admins on this lane.
    admins: list[str] = Field(default_factory=list)
    # Private chats from strangers: open, pairing (a code an admin approves) or allowlist
    # (strangers are ignored). Empty: the lane's default.
    dm: DmMode | None = None
    # What a stranger the lane lets in may do. Empty: public when an admin is configured
    # (or on the web), members otherwise, as before audiences existed.
    strangers: StrangerAudience | None = None


class LaneSettings(BaseModel):
    """Base of every lane's settings model."""

    # False for a lane whose strangers are visitors of a public page (the web widget).
    pairs_strangers: ClassVar[bool] = True

    access: LaneAccess = Field(default_factory=LaneAccess)

    def is_active(self) -> bool:
        """Whether `chorus serve` runs this lane with these settings."""
        raise NotImplementedError

    def allow_listed(self, user_id: str, username: str | None) -> bool:
        """Whether the lane's own allow-list names this user (they are members)."""
        return False

    def dm_mode(self) -> DmMode:
        if self.access.dm is not None:
            return self.access.dm
        return "pairing" if self.pairs_strangers and self.access.admins else "open"

    def stranger_audience(self) -> StrangerAudience:
        if self.access.strangers is not None:
            return self.access.strangers
        return "public" if not self.pairs_strangers or self.access.admins else "members"


class LaneRunner(Protocol):
    """A built lane, as `chorus serve` drives it."""

    name: str

    def mount(self, app: Any) -> None:
        """Add the lane's HTTP routes (webhooks, pages) to the one web app, if it has any."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


FindingStatus = Literal["ok", "warn", "fail"]
# How long a `chorus doctor` check waits for a platform or server to answer.
CHECK_SECONDS = 15.0


@dataclass(frozen=True)
class Finding:
    """One line of `chorus doctor`: how a part stands and, unless it is well, what to do."""

    status: FindingStatus
    text: str
    fix: str = ""


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
    # "package.module:function" of the lane's `chorus doctor` check: an async function of the
    # lane's settings returning a `Finding` (its token accepted, its platform reached).
    check_path: str | None = None

    def settings_model(self) -> type[LaneSettings]:
        module_name, _, class_name = self.settings_path.partition(":")
        model = getattr(importlib.import_module(module_name), class_name)
        if not (isinstance(model, type) and issubclass(model, LaneSettings)):
            raise TypeError(f"{self.settings_path} is not a LaneSettings model")
        return model

    async def check(self, settings: LaneSettings) -> Finding | None:
        """The lane's `chorus doctor` line for `settings`; None when the lane has no check."""
        if self.check_path is None:
            return None
        module_name, _, function_name = self.check_path.partition(":")
        finding: Finding = await getattr(importlib.import_module(module_name), function_name)(settings)
        return finding

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
