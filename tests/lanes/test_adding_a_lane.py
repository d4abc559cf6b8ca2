"""docs/lanes/adding-a-lane.md, done for real: a new lane registered with the runtime (`bot.lanes`)
gets its settings section and environment names, and `chorus serve` mounts and starts it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
READY_SECONDS = 120.0

SETTINGS = """
from bot.lanes import LaneSettings


class EchoSettings(LaneSettings):
    enabled: bool = False
    greeting: str = "hello"

    def is_active(self) -> bool:
        return self.enabled
"""

LANE = """
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse


class EchoRunner:
    name = "echo"

    def __init__(self, runtime):
        self.settings = runtime.settings.channels.echo
        self.marks = Path(runtime.settings.data_dir) / "echo-lane.log"

    def mount(self, app: FastAPI) -> None:
        @app.get("/echo", response_class=PlainTextResponse)
        async def echo() -> str:
            return self.settings.greeting

    async def start(self) -> None:
        self.marks.parent.mkdir(parents=True, exist_ok=True)
        with self.marks.open("a") as marks:
            marks.write("started\\n")

    async def stop(self) -> None:
        with self.marks.open("a") as marks:
            marks.write("stopped\\n")


def build(runtime):
    return EchoRunner(runtime)
"""

# How an installation adds the lane: one registration beside the built-in ones.
SERVE_WITH_ECHO = """
import sys

from bot import lanes

ECHO = lanes.LaneSpec(
    "echo", "echo_lane.settings:EchoSettings", "echo_lane", env_aliases={"CHORUS_ECHO_GREETING": "greeting"}
)
lanes.register(ECHO)
from bot.cli import main

raise SystemExit(main(sys.argv[1:]))
"""


def write_lane(root: Path) -> None:
    package = root / "echo_lane"
    package.mkdir()
    (package / "settings.py").write_text(textwrap.dedent(SETTINGS))
    (package / "__init__.py").write_text(textwrap.dedent(LANE))
    (root / "serve_with_echo.py").write_text(textwrap.dedent(SERVE_WITH_ECHO))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]),
        CHORUS_CONFIG=str(tmp_path / "absent.yaml"),
        CHORUS_DATABASE_URL=f"sqlite:///{tmp_path / 'chorus.db'}",
        CHORUS_DATA_DIR=str(tmp_path / "data"),
        **extra,
    )
    return env


def test_a_registered_lane_gets_its_settings_section(tmp_path: Path) -> None:
    write_lane(tmp_path)
    probe = (
        "import channels\n"
        "from bot import lanes\n"
        "lanes.register(lanes.LaneSpec('echo', 'echo_lane.settings:EchoSettings', 'echo_lane',"
        " env_aliases={'CHORUS_ECHO_GREETING': 'greeting'}))\n"
        "from bot.config import environment_names, load_settings\n"
        "import os\n"
        "settings = load_settings(environ=dict(os.environ))\n"
        "print(settings.channels.echo.enabled, settings.channels.echo.greeting)\n"
        "print(environment_names()['CHORUS_CHANNELS_ECHO_GREETING'])\n"
        "print([spec.name for spec in lanes.active_lanes(settings.channels)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=environ(tmp_path, CHORUS_ECHO_GREETING="hi there", CHORUS_CHANNELS_ECHO_ENABLED="true"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "True hi there",
        "('channels', 'echo', 'greeting')",
        "['web', 'echo']",
    ]


async def test_chorus_serve_mounts_and_starts_a_registered_lane(tmp_path: Path) -> None:
    write_lane(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(tmp_path / "serve_with_echo.py"), "serve"],
        cwd=tmp_path,
        env=environ(
            tmp_path,
            CHORUS_ECHO_GREETING="hi there",
            CHORUS_CHANNELS_ECHO_ENABLED="true",
            CHORUS_CHANNELS_WEB_PORT=str(port),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    answer = None
    try:
        deadline = time.monotonic() + READY_SECONDS
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    answer = await client.get(f"http://127.0.0.1:{port}/echo")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=60)
    assert answer is not None, errors
    assert answer.status_code == 200 and answer.text == "hi there"
    assert (tmp_path / "data" / "echo-lane.log").read_text().split()[0] == "started"
