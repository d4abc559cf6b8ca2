"""Logs: one JSON object per line with the turn's ids, or readable text; never bodies or tokens."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.logs import ContextFilter, JsonFormatter, LogFormat, make_handler
from bot.providers.openai import OpenAICompatibleProvider
from channels.web.app import create_app
from tests.admin.conftest import BASE_URL
from tests.admin.seed import ADMIN_TOKEN, admin_runtime
from tests.fakes.openai_server import FakeOpenAI, Reply, server_error
from tests.support.runtime import REPO_CONFIG, attachment, inbound

ROOT = Path(__file__).resolve().parents[2]
MODEL_KEY = "sk-model-key-never-logged-5d1e"
BODY = "my passport number is X-4471-PRIVATE"
DOCUMENT = "Quarterly numbers nobody may read: 918273."


@pytest.fixture
def captured() -> Iterator[dict[str, io.StringIO]]:
    """Everything logged at INFO and above, in both formats, as an operator's handler sees it."""
    streams = {"json": io.StringIO(), "text": io.StringIO()}
    root = logging.getLogger()
    handlers = []
    for log_format, stream in streams.items():
        handler = make_handler(log_format)  # type: ignore[arg-type]
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(stream)
        handler.setLevel(logging.INFO)
        root.addHandler(handler)
        handlers.append(handler)
    previous = root.level
    root.setLevel(logging.INFO)
    yield streams
    root.setLevel(previous)
    for handler in handlers:
        root.removeHandler(handler)


async def test_json_lines_carry_session_lane_and_turn(
    tmp_path: Path, fake_openai: FakeOpenAI, captured: dict[str, io.StringIO]
) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "key", max_retries=0)
    runtime = admin_runtime(tmp_path, provider, memory_enabled="false")
    try:
        fake_openai.script(Reply("hello"), Reply("again"))
        first = await runtime.engine.respond(inbound("hi", lane="telegram", user_id="7"))
        second = await runtime.engine.respond(inbound("hi again", lane="telegram", user_id="7"))
        await runtime.engine.drain()
    finally:
        await runtime.aclose()
    entries = [json.loads(line) for line in captured["json"].getvalue().splitlines()]
    turns = [entry for entry in entries if entry["logger"] == "bot.metrics"]
    assert [entry["message"].split(" in ")[0] for entry in turns] == ["turn complete", "turn complete"]
    for entry in turns:
        assert set(entry) >= {"time", "level", "logger", "message", "session_id", "lane", "turn_id"}
        assert entry["level"] == "INFO" and entry["lane"] == "telegram"
    assert [entry["session_id"] for entry in turns] == [first.session_id, second.session_id]
    assert turns[0]["turn_id"] != turns[1]["turn_id"]
    # Outside a turn the ids are absent, not left over from the last turn.
    logging.getLogger("chorus.test").info("between turns")
    after = json.loads(captured["json"].getvalue().splitlines()[-1])
    assert (after["session_id"], after["lane"], after["turn_id"]) == (None, None, None)
    text_turns = [line for line in captured["text"].getvalue().splitlines() if "bot.metrics" in line]
    assert f"session_id={first.session_id} lane=telegram turn_id=" in text_turns[0]
    assert "INFO bot.metrics [" in text_turns[0]


async def test_no_message_body_document_or_secret_is_logged_at_info(
    tmp_path: Path, fake_openai: FakeOpenAI, captured: dict[str, io.StringIO]
) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, MODEL_KEY, max_retries=1, backoff_base=0.01)
    runtime = admin_runtime(tmp_path, provider, model_api_key=MODEL_KEY)
    secrets = [BODY, DOCUMENT, ADMIN_TOKEN, MODEL_KEY]
    try:
        fake_openai.script(Reply(f"noted: {BODY}"), server_error(503), server_error(503))
        await runtime.engine.respond(inbound(BODY, user_id="alice"))
        await runtime.engine.respond(
            inbound(
                "read this",
                user_id="alice",
                attachments=(attachment("q3.txt", "text/plain", DOCUMENT.encode()),),
            )
        )
        code_reply = await runtime.engine.respond(inbound("/link", user_id="alice"))
        code = code_reply.text.split("Your link code: ")[1].split()[0].strip("`")
        secrets.append(code)
        await runtime.engine.respond(inbound(f"/link {code}", lane="telegram", user_id="55"))
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
        ) as http:
            visitor = (await http.post("/api/session", json={"name": "Grace"})).json()
            secrets.append(visitor["token"])
            await http.post("/admin/login", data={"token": ADMIN_TOKEN})
            await http.get("/admin/api/conversations", params={"q": "passport"})
        await runtime.engine.drain()
        assert runtime.memory is not None
        for chat, _ in runtime.stores.sessions.list_sessions():
            await runtime.memory.flush(chat)
    finally:
        await runtime.aclose()
    for log_format, stream in captured.items():
        written = stream.getvalue()
        assert "turn complete" in written and "turn error" in written, log_format
        for secret in secrets:
            assert secret not in written, (log_format, secret)


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_chorus_command_logs_in_the_configured_format(tmp_path: Path, log_format: LogFormat) -> None:
    environ = {
        **os.environ,
        "CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}",
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
        "CHORUS_LOGGING_FORMAT": log_format,
    }
    environ.pop("CHORUS_MODEL_BASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--config", str(REPO_CONFIG), "chat", "--user", "Ops"],
        input="hello\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environ,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # The terminal gets warnings; the chat's whole log is in its file.
    shown = [line for line in done.stderr.splitlines() if line.strip()]
    logged = [line for line in (tmp_path / "data" / "chat.log").read_text().splitlines() if line.strip()]
    assert any("DEMO model" in line for line in shown) and any("DEMO model" in line for line in logged)
    if log_format == "json":
        assert {json.loads(line)["level"] for line in shown} == {"WARNING"}
        entries = [json.loads(line) for line in logged]
        assert {entry["level"] for entry in entries} >= {"WARNING", "INFO"}
        turn = next(entry for entry in entries if entry["logger"] == "bot.metrics")
        assert turn["lane"] == "terminal" and turn["session_id"] and turn["turn_id"]
    else:
        assert all(not line.startswith("{") for line in shown + logged)
        assert any(" WARNING bot.runtime: " in line for line in shown)
        assert any(" INFO bot.metrics" in line for line in logged)


def test_formatter_keeps_exceptions_on_one_line() -> None:
    record = logging.LogRecord("chorus", logging.ERROR, __file__, 1, "failed %s", ("x",), None)
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    ContextFilter().filter(record)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line)["exception"].endswith("ValueError: boom")


def test_access_lines_lose_their_query_strings() -> None:
    stream = io.StringIO()
    handler = make_handler("json")
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/admin/api/conversations?q={BODY}", "1.1", 200),
        None,
    )
    handler.handle(record)
    line = json.loads(stream.getvalue())
    assert line["message"] == '127.0.0.1:5000 - "GET /admin/api/conversations HTTP/1.1" 200'
