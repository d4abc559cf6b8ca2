"""Takes the screenshots of the widget and the console that the docs show, in Chromium.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

A local server runs Chorus against the OpenAI-compatible stand-in of the tests, which answers
in Markdown as real models do; Debian's Chromium (/usr/bin/chromium) opens the widget at desktop
and phone width and logs in to the console. Everything runs on 127.0.0.1 and nothing is fetched.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.async_api import Browser, Page, ViewportSize, async_playwright  # noqa: E402

from bot.providers.openai import OpenAICompatibleProvider  # noqa: E402
from bot.runtime import Runtime  # noqa: E402
from channels.web.app import create_app  # noqa: E402
from tests.admin.seed import ADMIN_TOKEN, admin_runtime, seed  # noqa: E402
from tests.admin.test_console_browser import DISCORD_FAILURE  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCalls, echo_reply, last_user_text  # noqa: E402
from tests.support.live_server import LiveServer  # noqa: E402
from tests.support.runtime import inbound  # noqa: E402
from tests.web.test_widget_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)

FRUIT_ANSWER = """## Fruits that keep

Of the three, **apples** keep longest — store them *cold and apart*:

1. **Apples** — weeks in a cool cellar
2. **Pears** — a week or two, ripen on the counter
3. **Bananas** — days; keep them away from apples

| Fruit | Keeps | Best at |
|---|---|---|
| Apple | 4–8 weeks | 0–4 °C |
| Pear | 1–2 weeks | 0–2 °C |
| Banana | 3–5 days | 13 °C |

```python
def keeps(fruit: str) -> int:
    \"\"\"Days a fruit keeps, as a rough guide.\"\"\"
    return {"apple": 42, "pear": 10, "banana": 4}[fruit]
```

More in [the storage guide](https://example.org/storage)."""

NOTED = "Noted: **Miso** loves sardines and the window sill in the morning."

RECALL_ANSWER = """It is still in our conversation (not in memory yet): **Miso**, your cat, loves:

- sardines
- the window sill in the morning"""

PHONE_ANSWER = """Here is the week at a glance:

| Day | Morning | Afternoon | Evening | Notes |
|---|---|---|---|---|
| Monday | gym | report | choir | bring the score |
| Tuesday | dentist | — | cinema | 10:30 appointment |
| Wednesday | — | review | dinner | table for four |

Run `make plan` to print it."""


def answer(body: dict[str, Any]) -> str:
    """The stand-in's answers: Markdown for the questions the pictures ask, an echo otherwise."""
    said = last_user_text(body)
    for question, reply in (("fruits", FRUIT_ANSWER), ("week", PHONE_ANSWER), ("Miso loves", NOTED)):
        if question in said:
            return reply
    return echo_reply(body)


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    async with FakeOpenAI() as model:
        model.default = answer
        with tempfile.TemporaryDirectory() as data:
            runtime = admin_runtime(
                Path(data),
                OpenAICompatibleProvider(model.base_url),
                model_context_window="4000",
                context_collapse_share="0.6",
                context_compact_share="0.8",
                channels_discord_token="not-a-real-token",
            )
            runtime.lanes.failed("discord", DISCORD_FAILURE)
            long_id = await fill(runtime)
            async with LiveServer(create_app(runtime)) as live, async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                visitor = await widget(browser, live.base_url, model, out)
                await console(browser, live.base_url, visitor, long_id, out)
                await browser.close()
            await runtime.aclose()
    for picture in sorted(out.glob("*.png")):
        print(picture.relative_to(ROOT) if picture.is_relative_to(ROOT) else picture)


async def fill(runtime: Runtime) -> str:
    """Conversations for the console: the seeded ones, and a long one for the context chart."""
    await seed(runtime)
    long_id = ""
    for number in range(18):
        words = " ".join(f"detail{number}-{index}" for index in range(30 + 4 * (number % 5)))
        reply = await runtime.engine.respond(
            inbound(f"Planning note {number}: {words}", lane="discord", user_id="dana", display_name="Dana")
        )
        long_id = reply.session_id or long_id
        await runtime.engine.drain()
    return long_id


async def widget(browser: Browser, base_url: str, model: FakeOpenAI, out: Path) -> str:
    """The widget on the demo page: a Markdown answer, a tool call; then a phone. Returns the
    desktop visitor's conversation id."""
    page = await open_widget(browser, base_url, DESKTOP)
    await say(page, "Which fruits keep best?")
    await say(page, "My cat Miso loves sardines and the window sill in the morning.")
    model.script(ToolCalls([("recall", {"query": "Miso"})]), Reply(RECALL_ANSWER))
    await say(page, "What did I tell you about Miso?")
    await page.screenshot(path=str(out / "widget-desktop.png"))
    session_id = await page.evaluate("fetch('/api/session').then(r => r.json()).then(s => s.session_id)")

    phone = await open_widget(browser, base_url, PHONE, is_mobile=True)
    await say(phone, "What does my week look like?")
    await phone.screenshot(path=str(out / "widget-phone.png"))
    await say(phone, "/context")
    await phone.screenshot(path=str(out / "widget-phone-command.png"))
    return str(session_id)


async def open_widget(browser: Browser, base_url: str, viewport: ViewportSize, **options: Any) -> Page:
    context = await browser.new_context(viewport=viewport, device_scale_factor=1, **options)
    page = await context.new_page()
    await page.goto(base_url + "/")
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    return page


async def say(page: Page, text: str) -> None:
    """Sends `text` and waits until its answer has finished streaming."""
    root = "document.querySelector('#chorus-widget').shadowRoot"
    count = f"{root}.querySelectorAll('.log > .msg').length"
    before = await page.evaluate(count)
    await page.fill("textarea", text)
    await page.press("textarea", "Enter")
    await page.wait_for_function(f"n => !{root}.querySelector('.streaming') && {count} >= n + 2", arg=before)


async def console(browser: Browser, base_url: str, visitor: str, long_id: str, out: Path) -> None:
    page = await log_in(browser, base_url, DESKTOP)
    pages = {
        "conversations": "#/conversations",
        "transcript": f"#/conversation/{visitor}",
        "context": f"#/context/{long_id}",
        "memory": "#/memory",
        "personas": "#/personas",
        "tool-calls": "#/approvals",
        "health": "#/health",
    }
    for name, where in pages.items():
        await show(page, base_url, where)
        await page.screenshot(path=str(out / f"console-{name}.png"), full_page=True)

    phone = await log_in(browser, base_url, PHONE, is_mobile=True)
    await show(phone, base_url, f"#/conversation/{visitor}")
    await phone.screenshot(path=str(out / "console-phone.png"))
    await show(phone, base_url, "#/conversations")
    await phone.get_by_role("button", name="Menu").click()
    await phone.screenshot(path=str(out / "console-phone-menu.png"))


async def log_in(browser: Browser, base_url: str, viewport: ViewportSize, **options: Any) -> Page:
    context = await browser.new_context(viewport=viewport, device_scale_factor=1, **options)
    page = await context.new_page()
    await page.goto(base_url + "/admin/login")
    await page.fill("#token", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_selector("[data-testid=conversations]")
    return page


async def show(page: Page, base_url: str, where: str) -> None:
    await page.goto(f"{base_url}/admin{where}")
    await page.reload()
    await page.wait_for_selector("#page[data-page]:not([data-loading])")
    # Images load lazily; give the transcript's a moment to arrive.
    await page.wait_for_load_state("networkidle")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    asyncio.run(main(parser.parse_args().out))
