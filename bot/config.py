"""Settings: `config.yaml` first, then `CHORUS_*` environment variables on top.

Every leaf setting has an environment name built from its path, so
`model.base_url` is `CHORUS_MODEL_BASE_URL` and `channels.telegram.token` is
`CHORUS_CHANNELS_TELEGRAM_TOKEN`; a few common ones also have a short alias
(`CHORUS_TELEGRAM_TOKEN`, `CHORUS_DISCORD_TOKEN`). Secrets never have to live
in the file. The `channels` section has one part per lane registered with the runtime
(`bot.lanes`): each lane brings its own settings model and short names, and settings are
read with those registered when they are read (`settings_model`).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bot import lanes
from bot.errors import ConfigError

ENV_PREFIX = "CHORUS_"
# Who asks in a turn (docs/access.md): the tool policy answers per audience.
Audience = Literal["admins", "members", "public", "groups"]
AUDIENCES: tuple[Audience, ...] = ("admins", "members", "public", "groups")
# The tool policy's answer for one tool and one audience.
Decision = Literal["allow", "ask", "deny"]
CONFIG_PATH_ENV = "CHORUS_CONFIG"


def env_aliases() -> dict[str, tuple[str, ...]]:
    """Short names operators expect (each lane declares its own), mapped onto setting paths."""
    return {
        alias: ("channels", spec.name, setting)
        for spec in lanes.lanes()
        for alias, setting in spec.env_aliases.items()
    }


# A key written as `${NAME}` is read from the environment variable NAME when settings load.
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_key(value: Any) -> Any:
    """A key as `${NAME}` becomes the variable's value; keys never have to live in the file."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if not isinstance(value, str):
        return value
    match = _ENV_REFERENCE.fullmatch(value.strip())
    if match is None:
        return value
    name = match.group(1)
    if name not in os.environ:
        raise ValueError(f"the environment variable {name} named for a key is not set")
    return os.environ[name]


class EndpointSettings(BaseModel):
    """One model server: where it is, the model asked there, and its keys (tried in order)."""

    model_config = ConfigDict(extra="forbid")

    # "openai": any OpenAI-compatible chat-completions server.
    provider: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    name: str = ""
    api_key: SecretStr | None = None
    # More keys for the same server: a key refused for rate or credit waits while the next is used.
    api_keys: list[SecretStr] = Field(default_factory=list)

    @field_validator("api_key", mode="before")
    @classmethod
    def _key_from_environment(cls, value: Any) -> Any:
        return _expand_key(value)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys_from_environment(cls, value: Any) -> Any:
        return [_expand_key(item) for item in value] if isinstance(value, list) else value

    def keys(self) -> list[str | None]:
        """Every key of the endpoint in the order they are tried ([None] when it takes none)."""
        keys = [key.get_secret_value() for key in ([self.api_key] if self.api_key else []) + self.api_keys]
        return list(dict.fromkeys(key for key in keys if key)) or [None]


class ModelSettings(EndpointSettings):
    # Unknown keys under `model:` are ignored, as they always were; fallback entries are strict.
    model_config = ConfigDict(extra="ignore")

    name: str = "gpt-4o-mini"
    # Tried in order when the endpoint above (every key of it) is busy, out of credit or down.
    fallbacks: list[EndpointSettings] = Field(default_factory=list)
    # How long a key that was refused for rate or credit rests, unless the server said (Retry-After).
    cooldown_seconds: float = Field(default=30.0, ge=0)
    vision: bool = False
    # The window every model is fitted to, when set; unset, each model's is asked of its
    # server or learned from its first overflow (bot/windows.py, docs/models.md).
    context_window: int | None = Field(default=None, gt=0)
    # Per-model context windows, for personas that pick another model; these win over all else.
    context_windows: dict[str, int] = Field(default_factory=dict)
    # At most this much of the window is kept for the reply (a quarter of a small window).
    reply_reserve_tokens: int = Field(default=1024, gt=0)
    # A share of the window left free for what no count sees (the chat template's own
    # tokens); three times as much until the model's answers calibrated the count.
    token_margin: float = Field(default=0.05, ge=0, lt=0.5)
    # The offline demo model's window, to watch a small model's budget without a server.
    demo_window: int | None = Field(default=None, gt=0)
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    max_retries: int = 3

    def model_for(self, persona_model: str | None) -> str:
        """The model a persona speaks with: its own, else the deployment's."""
        return persona_model or self.name


class ModelChoiceSettings(BaseModel):
    """A model people may pick for their conversation with /model."""

    model_config = ConfigDict(extra="forbid")

    # The short name /model takes ("fast", "smart").
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
    provider: Literal["openai", "anthropic"] = "openai"
    # The model id sent to the server.
    model: str
    # Empty: the main endpoint (`model.base_url` and its keys).
    base_url: str | None = None
    api_key: SecretStr | None = None
    # Empty: `model.context_windows` / `model.context_window`.
    context_window: int | None = Field(default=None, gt=0)
    tools: bool = True
    vision: bool = False
    # Whether it takes a thinking level (/think off|low|high).
    thinking: bool = False

    @field_validator("api_key", mode="before")
    @classmethod
    def _key_from_environment(cls, value: Any) -> Any:
        return _expand_key(value)


class PersonaSettings(BaseModel):
    id: str
    name: str
    prompt: str
    greeting: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    # Shown where a platform can show who speaks with a picture (Discord webhooks).
    avatar_url: str | None = None
    # The tools this persona may call (names, `*` wildcards), within `tools.allow`; None: all.
    tools: list[str] | None = None


# Used only when a deployment configures no personas at all.
FALLBACK_PERSONA = PersonaSettings(
    id="assistant", name="Assistant", prompt="You are a helpful, concise assistant."
)


class LimitSettings(BaseModel):
    max_message_chars: int = 32_000
    max_upload_bytes: int = 10 * 1024 * 1024
    image_max_side: int = 1024
    # Larger images are refused from their header, before any pixel is decoded.
    image_max_pixels: int = 40_000_000
    link_code_ttl_seconds: int = 600
    # Pairing codes strangers get in a DM (`access.dm: pairing`): how long one is valid, how
    # many wait per lane at most (the oldest is dropped), and how many a lane hands out a minute.
    pairing_code_ttl_seconds: int = Field(default=3600, gt=0)
    pairing_pending_max: int = Field(default=50, ge=1)
    pairing_codes_per_minute: int = Field(default=10, ge=1)
    # Voice notes and audio files: longer ones are refused (measured by decoding, not from
    # the file's own claim), and so are larger files, before they are downloaded when the
    # platform says the size. Telegram lets bots download files of up to 20 MB.
    audio_max_seconds: float = Field(default=600.0, gt=0)
    audio_max_bytes: int = Field(default=20 * 1024 * 1024, gt=0)


class ContextSettings(BaseModel):
    # How the window of CONTEXT_COUNT messages moves (docs/context.md): `stepped` holds its
    # first message for many turns, then drops to `window_low_water` messages in one move, so
    # a model server's cache of the history holds; `rolling` (seed 000's) moves every turn.
    window: Literal["stepped", "rolling"] = "stepped"
    # Messages a step leaves (the newest included); unset, half of CONTEXT_COUNT.
    window_low_water: int | None = Field(default=None, ge=1)
    max_chars: int | None = None
    document_tokens: int = 1500
    documents_total_tokens: int = 6000
    # Compaction starts when the context passes this share of the model window.
    compact_share: float = 0.7
    keep_recent_messages: int = 6
    # Background collapse starts when the context passes this share.
    collapse_share: float = 0.85
    collapse_range_messages: int = 8
    # In a tight window, the share of the room left after the instructions and the question
    # that earlier messages are owed before tool schemas, recall and the memory snapshot.
    history_share: float = Field(default=0.5, ge=0, le=1)
    overflow_retries: int = 3
    # Messages that left the window (CONTEXT_COUNT or the token budget) wait
    # uncovered until this many have piled up; compaction then folds them into
    # the summary, so nothing silently vanishes from the model's view for long.
    compact_dropped_messages: int = 8
    # The length a summary is asked to stay within, in tokens.
    summary_tokens: int = 600
    # Attempts per summariser call, and calls per compaction at most; past
    # them the summary falls back to a plain statement of what was folded.
    summary_attempts: int = 2
    summary_max_calls: int = 24

    @model_validator(mode="after")
    def _low_water_within_the_window(self) -> ContextSettings:
        if self.window_low_water is None:
            return self
        # Imported here: loading settings (every command, `chorus sessions` too) must not load
        # the transcript package and its tokenizer.
        from transcript.limits import CONTEXT_COUNT

        if self.window_low_water > CONTEXT_COUNT:
            raise ValueError(
                f"context.window_low_water ({self.window_low_water}) must not exceed "
                f"CONTEXT_COUNT ({CONTEXT_COUNT}): a step cannot leave more than the window holds"
            )
        return self

    @property
    def low_water(self) -> int:
        """Messages a window step leaves; CONTEXT_COUNT (a step of one) for the rolling window."""
        from transcript.limits import CONTEXT_COUNT

        if self.window == "rolling":
            return CONTEXT_COUNT
        return self.window_low_water if self.window_low_water is not None else max(CONTEXT_COUNT // 2, 1)


class MemorySettings(BaseModel):
    enabled: bool = True
    turns_threshold: int = 8
    chars_threshold: int = 6000
    steps_threshold: int = 20
    max_items: int = 40
    snapshot_items: int = 3
    dedup_threshold: float = 0.8
    recent_window: int = 50
    recall_items: int = 3
    # Recalled lines in a turn's context stop at this share of the context budget.
    recall_budget_share: float = 0.1
    # Dense recall (sentence embeddings) when the `dense` extra is installed; off = full-text only.
    dense: bool = True
    # The end of a session's activity: this many seconds without a turn (or the
    # process shutting down) offloads whatever is pending; 0 turns the timer off.
    idle_seconds: float = 600.0
    # The flush at shutdown stops after this long (a model distils each session); sessions
    # it did not reach are flushed by their idle timer, a durable job, after the next start.
    shutdown_flush_seconds: float = Field(default=10.0, ge=0)


# A server's name starts its tools' names (`<server>__<tool>`), which models take
# only in ^[A-Za-z0-9_-]{1,64}$; `__` is kept for the separator.
MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


class McpServerSettings(BaseModel):
    """One Model Context Protocol server: how to reach it and which of its tools to offer.

    `env` values, `headers` values and `url` may name environment variables as
    `${NAME}`, read when the server starts, so secrets never have to live in the file.
    """

    model_config = ConfigDict(extra="forbid")

    # "stdio" (a command Chorus runs), "http" (streamable HTTP) or "sse" (the legacy
    # HTTP+SSE transport); empty: stdio when `command` is set, http when `url` is.
    transport: Literal["stdio", "http", "sse"] | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    # The only variables a stdio server gets besides PATH, HOME, USER, LOGNAME, SHELL and TERM.
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = Field(default=None, repr=False)
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    # The server's tool names (without the `<server>__` prefix) offered, `*` wildcards;
    # exclude wins over include.
    include: list[str] = Field(default_factory=lambda: ["*"])
    exclude: list[str] = Field(default_factory=list)
    # One call's bound for this server's tools; empty: `tools.timeout_seconds`.
    timeout_seconds: float | None = Field(default=None, gt=0)
    # Its tools in group chats: true, false, or empty to follow `tools.in_groups`.
    in_groups: bool | None = None
    enabled: bool = True
    # Starting and listing its tools; a slower server counts as failed and is retried.
    startup_timeout_seconds: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _reachable(self) -> McpServerSettings:
        if self.transport is None:
            self.transport = "stdio" if self.command else "http"
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs `command`")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"an {self.transport} server needs `url`")
        if self.command and self.url:
            raise ValueError("set `command` (stdio) or `url` (http, sse), not both")
        return self


class ToolSettings(BaseModel):
    # Off: the model is offered no tools and answers in text, as before tools existed.
    enabled: bool = True
    # Model ↔ tool rounds in one turn; past them the model answers once more without tools.
    max_steps: int = Field(default=8, ge=1)
    # One call's bound; a call that takes longer is answered with a timeout error.
    timeout_seconds: float = Field(default=30.0, gt=0)
    # A result is stored whole but enters the context trimmed (head and tail) to this.
    result_max_tokens: int = Field(default=2000, ge=64)
    # Tool names offered (`*` wildcards); deny wins over allow.
    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)
    # Group chats: "read_only" tools only, "all", "none", or a list of names/wildcards.
    in_groups: Literal["read_only", "all", "none"] | list[str] = "read_only"
    # Per tool name (`*` wildcards), what each audience (admins, members, public, groups) gets:
    # allow, ask (the call waits for a yes) or deny; of the names that match and list the
    # audience, the most specific decides. Unlisted: the defaults in docs/access.md.
    approve: dict[str, dict[Audience, Decision]] = Field(default_factory=dict)
    # How long a call waits for its yes or no; no answer in time denies it.
    approval_seconds: float = Field(default=300.0, gt=0)
    # MCP servers by name; their tools are offered as `<name>__<tool>` (docs/mcp.md).
    mcp_servers: dict[str, McpServerSettings] = Field(default_factory=dict)

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, servers: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in servers:
            if not MCP_SERVER_NAME.fullmatch(name) or "__" in name:
                raise ValueError(
                    f"{name!r} cannot name an MCP server: use up to 32 letters, digits, - and _ "
                    "(no double underscore), since it starts each of its tools' names"
                )
        return servers


class SpeechSettings(BaseModel):
    # An OpenAI-compatible server with /audio/transcriptions and /audio/speech (OpenAI, a local
    # faster-whisper or whisper.cpp server). Empty: voice notes are stored with their duration
    # and `chorus speech transcribe` hears them once a server is set.
    base_url: str | None = None
    api_key: SecretStr | None = None
    stt_model: str = "whisper-1"
    # The language most voice notes are in (ISO 639-1, "en"); empty: the service detects it.
    language: str | None = None
    # Spoken replies (/voice on): the model and the voice it speaks with.
    tts_model: str = "tts-1"
    voice: str = "alloy"
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)


class RecoverySettings(BaseModel):
    # What a starting process does with a turn a dead process left unanswered:
    # answer it on its lane, tell the person it went unanswered, or leave it.
    mode: Literal["answer", "notice", "off"] = "answer"
    # Older unanswered messages are left alone: an answer hours late helps nobody.
    max_age_seconds: float = 3600.0
    # With several processes on PostgreSQL, how often each looks for turns of one that died.
    scan_seconds: float = 15.0


class JobSettings(BaseModel):
    # Run after-turn jobs inside `chorus serve`. Off only on PostgreSQL, when
    # `chorus worker` processes run them instead.
    worker: bool = True
    # Jobs of different sessions a worker runs at once (one session's never overlap).
    concurrency: int = Field(default=4, ge=1)
    # A failing job is retried with a growing wait, this many runs in all.
    max_attempts: int = Field(default=5, ge=1)
    # PostgreSQL: a worker silent this long is taken for dead, and its running jobs run again.
    stalled_seconds: float = Field(default=30.0, gt=0)
    # How often a waiting worker looks for jobs it was not told about (timers, other processes).
    poll_seconds: float = Field(default=1.0, gt=0)


class ReminderSettings(BaseModel):
    # Reminders one person (or group) may have waiting at once.
    max_active: int = Field(default=50, ge=1)
    # A reminder that fell due while Chorus was down is still delivered (marked late)
    # when it is younger than this at start; an older one is marked missed.
    max_late_seconds: float = Field(default=86_400.0, ge=0)
    # The longest text a reminder may carry.
    max_text_chars: int = Field(default=1000, ge=1)
    # Recurring reminders fire at most this often.
    min_interval_seconds: float = Field(default=60.0, ge=60)
    # A platform that refuses a delivery (rate limit, outage) is tried this many times in all.
    delivery_attempts: int = Field(default=3, ge=1)


class ChannelSettingsBase(BaseModel):
    """The `channels` section: one field per lane registered in `bot.lanes`, named after the lane."""

    if TYPE_CHECKING:
        # Lane fields are added from the registered lanes (`settings_model`); each lane reads its own.
        def __getattr__(self, name: str) -> Any: ...


class LoggingSettings(BaseModel):
    # "json": one JSON object per line, for log shippers.
    format: Literal["text", "json"] = "text"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid")

    database_url: str = "sqlite:///./data/chorus.db"
    data_dir: Path = Path("./data")
    log_level: str = "INFO"
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    # On SIGTERM/SIGINT, how long running turns may take to finish before they are cut.
    shutdown_grace_seconds: float = 20.0
    default_persona: str = "assistant"
    # The time zone reminders are read in for someone who has not set theirs (/timezone).
    timezone: str = "UTC"
    personas: list[PersonaSettings] = Field(default_factory=lambda: [FALLBACK_PERSONA])
    model: ModelSettings = Field(default_factory=ModelSettings)
    # The models /model offers for a conversation; empty: only the persona's.
    models: list[ModelChoiceSettings] = Field(default_factory=list)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    speech: SpeechSettings = Field(default_factory=SpeechSettings)
    recovery: RecoverySettings = Field(default_factory=RecoverySettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    reminders: ReminderSettings = Field(default_factory=ReminderSettings)
    channels: ChannelSettingsBase = Field(default_factory=ChannelSettingsBase)

    def configured_windows(self) -> dict[str, int]:
        """The windows the operator wrote down per model: `models:` entries', then `model.context_windows`."""
        listed = {entry.model: entry.context_window for entry in self.models if entry.context_window}
        return {**listed, **self.model.context_windows}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Init values (the parsed YAML) already carry the environment overrides.
        return (init_settings,)


def load_settings(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Read the YAML file (if any), apply environment overrides, validate."""
    env = dict(os.environ if environ is None else environ)
    config_path = Path(path or env.get(CONFIG_PATH_ENV, "config.yaml"))
    data: dict[str, Any] = {}
    if config_path.exists():
        try:
            loaded = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            raise ConfigError(f"{config_path} is not valid YAML: {error}") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{config_path} must contain a mapping of settings")
        data = loaded or {}
    _apply_environment(data, env)
    try:
        return settings_model()(**data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc'])}: {issue['msg']}" for issue in error.errors()
        )
        raise ConfigError(f"Invalid configuration — {problems}") from error


def settings_model() -> type[Settings]:
    """`Settings` with a `channels` section holding every lane registered so far."""
    return _settings_with_lanes(tuple(spec.name for spec in lanes.lanes()))


@functools.cache
def _settings_with_lanes(names: tuple[str, ...]) -> type[Settings]:
    # A lane is registered once, so the names stand for the lanes; a lane registered
    # later makes another model.
    specs = {spec.name: spec for spec in lanes.lanes()}
    sections: dict[str, Any] = {
        name: (model, Field(default_factory=model))
        for name in names
        for model in [specs[name].settings_model()]
    }
    channels = create_model("ChannelSettings", __base__=ChannelSettingsBase, **sections)
    return create_model("Settings", __base__=Settings, channels=(channels, Field(default_factory=channels)))


def environment_names() -> dict[str, tuple[str, ...]]:
    """Every environment variable Chorus reads, with the setting path it sets."""
    names = env_aliases()
    for path in _leaf_paths(settings_model(), ()):
        names[ENV_PREFIX + "_".join(path).upper()] = path
    return names


def _leaf_paths(model: type[BaseModel], prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths.extend(_leaf_paths(annotation, (*prefix, name)))
        else:
            paths.append((*prefix, name))
    return paths


def _apply_environment(data: dict[str, Any], env: dict[str, str]) -> None:
    for env_name, path in environment_names().items():
        if env_name not in env:
            continue
        node = data
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = {}
                node[key] = child
            node = child
        node[path[-1]] = _parse_env_value(env[env_name])


def _parse_env_value(raw: str) -> Any:
    # Lists and mappings (allow-lists, per-model windows) are written as JSON.
    stripped = raw.strip()
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw
