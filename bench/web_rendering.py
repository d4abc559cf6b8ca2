"""Rendering a streaming reply in the browser: the widget's and the console's renderer in Chromium.

A reply streams as text deltas; the widget draws at most once per frame. This measures what one
drawing costs as the reply grows — Markdown lexed, changed blocks rendered and sanitised, the
page laid out — for a long mixed reply and a 5,000-line code block, against drawing the whole
reply again each time (marked + DOMPurify over all of it, the simple way), and what finishing
costs (the closing draw, with highlighting). Browser time is wall time in the page
(`performance.now()`); the table says the machine's load.

Run: .venv/bin/python bench/web_rendering.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.async_api import async_playwright  # noqa: E402

from bench.common import markdown_table  # noqa: E402
from channels.web.bundles import console_script  # noqa: E402
from tests.web.replies import FRUITS, long_code  # noqa: E402
from tests.web.test_widget_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

# Characters per drawing: what arrives between two frames of a fast model, and a coarser step.
STEPS = (80, 800)

MEASURE = """
async ({ text, step }) => {
  const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
  const stream = async (draw, finish) => {
    const box = document.createElement('div');
    box.style.width = '340px';
    document.body.replaceChildren(box);
    const times = [];
    for (let end = step; end < text.length + step; end += step) {
      const started = performance.now();
      draw(box, text.slice(0, end));
      box.offsetHeight;  // the layout the browser does before it paints
      times.push(performance.now() - started);
      await frame();
    }
    const started = performance.now();
    finish(box, text);
    box.offsetHeight;
    const finished = performance.now() - started;
    times.sort((a, b) => a - b);
    const at = (share) => times[Math.min(times.length - 1, Math.floor(share * times.length))];
    const max = times[times.length - 1];
    return { updates: times.length, p50: at(0.5), p99: at(0.99), max: max, finish: finished };
  };
  let reply = null;
  const chorus = await stream(
    (box, part) => { reply = reply || new ChorusRender.Reply(box); reply.update(part, false); },
    (box, whole) => reply.update(whole, true),
  );
  const policy = { RETURN_DOM_FRAGMENT: true };
  const whole = (box, part) => box.replaceChildren(DOMPurify.sanitize(marked.parse(part), policy));
  const simple = await stream(whole, (box, all) => {
    whole(box, all);
    for (const code of box.querySelectorAll('pre code')) hljs.highlightElement(code);
  });
  return { chorus, simple };
}
"""


def replies() -> dict[str, str]:
    return {
        "mixed reply (320 blocks: prose, lists, tables, code)": "\n\n".join([FRUITS] * 40),
        "5,000-line code block": long_code(5000),
    }


async def measure() -> list[dict[str, Any]]:
    rows = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page()
        await page.set_content("<!doctype html><html><body></body></html>")
        await page.add_script_tag(content=console_script().body.decode())
        # Once unmeasured, so that neither way pays for the first compilation of the libraries.
        await page.evaluate(MEASURE, {"text": FRUITS, "step": 40})
        for name, text in replies().items():
            for step in STEPS:
                result = await page.evaluate(MEASURE, {"text": text, "step": step})
                chorus, simple = result["chorus"], result["simple"]
                rows.append(
                    {
                        "reply": name,
                        "characters": len(text),
                        "per drawing": step,
                        "drawings": chorus["updates"],
                        "Chorus p50 / p99 / max ms": _ms(chorus),
                        "whole reply again p50 / p99 / max ms": _ms(simple),
                        "finish ms (Chorus / whole)": f"{chorus['finish']:.1f} / {simple['finish']:.1f}",
                    }
                )
        await browser.close()
    return rows


def _ms(result: dict[str, float]) -> str:
    return f"{result['p50']:.1f} / {result['p99']:.1f} / {result['max']:.1f}"


def main() -> None:
    rows = asyncio.run(measure())
    print(markdown_table(rows))
    print(f"\nload average {json.dumps([round(value, 2) for value in os.getloadavg()])}")


if __name__ == "__main__":
    main()
