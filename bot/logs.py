"""Log setup: human-readable lines by default, one JSON object per line for log shippers.

The engine binds the session, lane and turn id of the turn it runs (`turn_scope`); both
formats add them to every record logged meanwhile, including after-turn work started by
the turn (asyncio copies the context into the tasks it creates). Message bodies and
tokens are never logged at INFO: log what happened and to which session, not what was said.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

LogFormat = Literal["text", "json"]

session_id_var: ContextVar[str | None] = ContextVar("chorus_session_id", default=None)
lane_var: ContextVar[str | None] = ContextVar("chorus_lane", default=None)
turn_id_var: ContextVar[str | None] = ContextVar("chorus_turn_id", default=None)

_FIELDS = (("session_id", session_id_var), ("lane", lane_var), ("turn_id", turn_id_var))
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(turn)s: %(message)s"


def new_turn_id() -> str:
    return secrets.token_hex(6)


@contextmanager
def turn_scope(lane: str | None, turn_id: str | None = None) -> Iterator[str]:
    """Binds a new turn's lane and id to the log records written inside; yields the turn id.

    The session is bound with `bind_session` once the turn knows it. Previous values are
    restored with `set`, not with reset tokens: a turn is an async generator, and its
    `finally` may run in another context (a lane closing it late).
    """
    turn_id = turn_id or new_turn_id()
    previous = [var.get() for _, var in _FIELDS]
    session_id_var.set(None)
    lane_var.set(lane)
    turn_id_var.set(turn_id)
    try:
        yield turn_id
    finally:
        for (_, var), value in zip(_FIELDS, previous, strict=True):
            var.set(value)


def bind_session(session_id: str) -> None:
    session_id_var.set(session_id)


class ContextFilter(logging.Filter):
    """Copies the bound turn ids onto every record (None outside a turn)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _FIELDS:
            if not hasattr(record, name):
                setattr(record, name, var.get())
        parts = [f"{name}={getattr(record, name)}" for name, _ in _FIELDS if getattr(record, name)]
        record.turn = f" [{' '.join(parts)}]" if parts else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, turn ids, exception.

    A record logged with `extra={"fields": {...}}` adds those fields (a tool call's name,
    outcome and duration), so shippers need not parse the message.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, var in _FIELDS:
            entry[name] = getattr(record, name, var.get())
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update({key: value for key, value in fields.items() if key not in entry})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class _ChorusHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr, in the configured format."""


class _ChorusFileHandler(logging.FileHandler):
    """A log file, in the configured format (a terminal chat's whole log)."""


class AccessQueryFilter(logging.Filter):
    """Drops query strings from uvicorn's access lines: a search term can quote a message."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, version, status = args
            record.args = (client, method, str(path).split("?", 1)[0], version, status)
        return True


def make_handler(log_format: LogFormat, log_file: Path | None = None) -> logging.Handler:
    """A handler writing to stderr, or to `log_file` (appended to), in `log_format`."""
    handler: logging.Handler
    if log_file is None:
        handler = _ChorusHandler()
    else:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = _ChorusFileHandler(log_file, encoding="utf-8")
    handler.addFilter(ContextFilter())
    handler.addFilter(AccessQueryFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT_FORMAT))
    return handler


def configure_logging(
    level: str, log_format: LogFormat, *, log_file: Path | None = None, console_level: str | None = None
) -> None:
    """The root logger writes to stderr in `log_format`; uvicorn's loggers go through it too.

    With `log_file`, every record at `level` goes to that file as well, and stderr gets only
    those at `console_level` and above (a terminal chat shows the conversation, and problems).
    Handlers others installed (a test runner's capture) stay; a previous call's are replaced.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _ChorusHandler | _ChorusFileHandler):
            root.removeHandler(handler)
            handler.close()
    console = make_handler(log_format)
    if console_level is not None:
        console.setLevel(console_level.upper())
    root.addHandler(console)
    if log_file is not None:
        root.addHandler(make_handler(log_format, log_file))
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    # httpx logs every request URL at INFO, and some APIs put secrets in URLs
    # (Telegram's bot token); migration chatter on every start hides what matters.
    for name in ("httpx", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
