"""Telegram formatting benchmark: the model's Markdown → text + entities, split at 4096 units.

Every draft update and every final reply on Telegram goes through `render` and `split`;
this measures them on replies of typical shapes and sizes (prose with inline markup, a
code block, a long mixed reply), so a slow converter would show before users notice.

Run: .venv/bin/python bench/telegram_format.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import markdown_table, median, percentile  # noqa: E402
from channels.telegram.formatting import render, split  # noqa: E402
from channels.telegram.replies import DRAFT_SOURCE_CHARS  # noqa: E402

REPEATS = 30


def replies() -> dict[str, str]:
    prose = (
        "Sure — call `my_helper_function` from **utils.py**, then check "
        "https://example.org/docs/snake_case_names for _details_. "
    )
    code = "```python\n" + "\n".join(f"print('line {index} 🚀')" for index in range(60)) + "\n```"
    mixed = "\n\n".join(f"## Part {index}\n\n{prose * 3}\n\n{code}" for index in range(12))
    return {
        "short answer": prose,
        "answer with a code block": prose * 4 + "\n\n" + code,
        "long mixed reply": mixed,
    }


def main() -> None:
    rows = []
    for name, text in replies().items():
        samples = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            parts = split(render(text, speaker="Ada"))
            samples.append((time.perf_counter() - started) * 1000)
        draft = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            split(render(text[:DRAFT_SOURCE_CHARS], speaker="Ada"))
            draft.append((time.perf_counter() - started) * 1000)
        rows.append(
            {
                "reply": name,
                "characters": len(text),
                "messages": len(parts),
                "entities": sum(len(part.entities) for part in parts),
                "final p50 ms": round(median(samples), 2),
                "final p99 ms": round(percentile(samples, 0.99), 2),
                "draft update p50 ms": round(median(draft), 2),
            }
        )
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
