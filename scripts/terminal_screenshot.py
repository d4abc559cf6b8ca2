"""The screenshot of `chorus chat` in docs/screenshots/terminal-chat.png, taken as a person sees it.

`chorus chat` runs in a real terminal (tmux, 100 × 42) against the OpenAI-compatible
stand-in of the tests, which answers in Markdown and calls one tool; the keys are typed
with `tmux send-keys`, each step waiting until the screen shows its answer. The pane is
captured with its colours, drawn by rich as an SVG of a terminal window, and that SVG is
photographed by headless Chromium.

    .venv/bin/python scripts/terminal_screenshot.py [--out docs/screenshots/terminal-chat.png]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.text import Text  # noqa: E402

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCalls  # noqa: E402

COLUMNS, ROWS = 100, 42
SOCKET = "chorus-screenshot"
DEADLINE = 120.0
ANSWER = """## Three fruits for the winter

From what you told me, you like them **crisp** and not too sweet:

1. **Apples** — Cox or Braeburn keep for months in a cool place.
2. **Pears** — pick them hard; they ripen on the counter.
3. **Quinces** — too hard raw, lovely baked with honey.

| fruit  | keeps      | best       |
|--------|------------|------------|
| apple  | 3–5 months | raw        |
| pear   | 2–3 months | ripe, soft |
| quince | 2 months   | baked      |

```python
def ripe(days_on_counter: int) -> bool:
    return days_on_counter >= 4
```

Ask me for a recipe if the quinces win."""


def serve_model(ready: threading.Event, holder: dict[str, str], stop: threading.Event) -> None:
    async def run() -> None:
        async with FakeOpenAI("gpt-4o-mini") as server:
            server.script(ToolCalls([("recall", {"query": "fruits"})]), Reply(ANSWER, delay=0.01))
            holder["url"] = server.base_url
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.1)

    asyncio.run(run())


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=True, capture_output=True, text=True).stdout


def wait_for(text: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while text not in tmux("capture-pane", "-p", "-t", "chat"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{text!r} never appeared:\n{tmux('capture-pane', '-p', '-t', 'chat')}")
        time.sleep(0.2)


def type_line(keys: str, then: str) -> None:
    tmux("send-keys", "-t", "chat", "-l", keys)
    tmux("send-keys", "-t", "chat", "Enter")
    wait_for(then)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "terminal-chat.png")
    args = parser.parse_args()
    ready, stop, holder = threading.Event(), threading.Event(), {}
    model = threading.Thread(target=serve_model, args=(ready, holder, stop), daemon=True)
    model.start()
    ready.wait(DEADLINE)
    with tempfile.TemporaryDirectory() as folder:
        environment = {
            "CHORUS_DATABASE_URL": f"sqlite:///{folder}/chorus.db",
            "CHORUS_DATA_DIR": f"{folder}/data",
            "CHORUS_MODEL_BASE_URL": holder["url"],
            "CHORUS_MEMORY_DENSE": "false",
            "TERM": "xterm-256color",
        }
        exports = " ".join(f"{key}={value}" for key, value in environment.items())
        command = f"cd {ROOT} && env {exports} {sys.executable} -m bot.cli chat --user grace"
        tmux("new-session", "-d", "-s", "chat", "-x", str(COLUMNS), "-y", str(ROWS), command)
        try:
            wait_for("you ›")
            type_line("Which fruits keep through the winter?", "quinces win")
            type_line("/status", "Context:")
            tmux("send-keys", "-t", "chat", "-l", "Thank you!")
            time.sleep(0.5)  # the typed keys are drawn: nothing to wait on but the screen itself
            captured = tmux("capture-pane", "-p", "-e", "-t", "chat")
        finally:
            tmux("kill-server")
            stop.set()
    console = Console(record=True, width=COLUMNS, force_terminal=True, file=io.StringIO())
    console.print(Text.from_ansi(captured.rstrip("\n")))
    with tempfile.TemporaryDirectory() as folder:
        svg = Path(folder) / "terminal.svg"
        svg.write_text(console.export_svg(title="chorus chat"), encoding="utf-8")
        width, height = _size_of(svg.read_text(encoding="utf-8"))
        subprocess.run(
            [
                shutil.which("chromium") or "/usr/bin/chromium",
                "--headless",
                "--no-sandbox",
                "--hide-scrollbars",
                f"--window-size={width},{height}",
                f"--screenshot={args.out}",
                svg.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {args.out}")


def _size_of(svg: str) -> tuple[int, int]:
    """The SVG's viewBox size, rounded up: the window Chromium photographs it in."""
    view_box = svg.split('viewBox="', 1)[1].split('"', 1)[0].split()
    return int(float(view_box[2]) + 1), int(float(view_box[3]) + 1)


if __name__ == "__main__":
    main()
