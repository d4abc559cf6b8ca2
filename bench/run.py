"""Run every Chorus benchmark and print its tables.

    .venv/bin/python bench/run.py                 # all of them
    .venv/bin/python bench/run.py core memory     # a selection

Each benchmark is also runnable on its own (`.venv/bin/python bench/core.py`).
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BENCHMARKS = {
    "core": ("bench.core", "Core: context build, window vs trim_messages, engine turns"),
    "web": ("bench.web_visitors", "Web lane: concurrent visitors"),
    "context": ("bench.context_replay", "Context management: LoCoMo replay in a small window"),
    "memory": ("bench.memory_offload", "Long-term memory: LoCoMo offload and recall"),
    "recall": ("bench.recall", "Recall: the development question set over LoCoMo group chats"),
    "telegram": ("bench.telegram_format", "Telegram: Markdown to text and entities, split at 4096"),
    "rendering": ("bench.web_rendering", "Widget and console: drawing a streaming reply in Chromium"),
    "console": ("bench.console", "Operator's console: list, transcript and context chart on a busy database"),
    "scale": ("bench.scale", "Several processes on one PostgreSQL: throughput and a crash"),
    "steady": (
        "bench.steady_state",
        "Steady state: CPU per turn of a long conversation, after-turn work in",
    ),
    "startup": ("bench.startup", "Cold start: chorus serve to healthy, chorus sessions"),
    "tools": ("bench.tool_rounds", "Tool rounds: server CPU per round, excluding the tool and the model"),
    "real": (
        "bench.real_model",
        "Real model: llama.cpp on SmolLM2-135M at n_ctx 2048, tools on/off, its window asked/hidden",
    ),
    "caching": ("bench.caching", "Prompt caching: prompt tokens billed per turn of a 50-turn conversation"),
}


def main(selected: list[str]) -> int:
    unknown = [name for name in selected if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        return 2
    for name in selected or list(BENCHMARKS):
        module_name, title = BENCHMARKS[name]
        print(f"\n## {title}\n", flush=True)
        started = time.perf_counter()
        importlib.import_module(module_name).main()
        print(f"\n({name}: {time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
