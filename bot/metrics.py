"""Prometheus instruments for what an operator watches, and their text exposition.

The turn engine (`bot.turns.observed`), the provider wrapper and the context and memory
workers update these module-level instruments; `/metrics` renders them together with the
gauges read from a runtime at scrape time (job queue depth). Counters are per process: Prometheus sums
them over the processes it scrapes. Labels stay few and bounded (lane, outcome, kind).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY = CollectorRegistry(auto_describe=True)

# Seconds: streaming replies start within a second or two, long ones run for minutes.
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)

TURNS = Counter(
    "chorus_turns",
    "Model turns by lane and outcome (complete, interrupted, stopped, error, duplicate).",
    ["lane", "outcome"],
    registry=REGISTRY,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "chorus_time_to_first_token_seconds",
    "From a turn's start to the first streamed text.",
    ["lane"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TURN_DURATION = Histogram(
    "chorus_turn_duration_seconds",
    "From a turn's start to its final reply.",
    ["lane"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
ACTIVE_STREAMS = Gauge(
    "chorus_active_streams", "Turns streaming a reply right now.", ["lane"], registry=REGISTRY
)
PROVIDER_ERRORS = Counter(
    "chorus_provider_errors",
    "Model calls that failed after retries, by error kind.",
    ["kind"],
    registry=REGISTRY,
)
MODEL_FAILOVERS = Counter(
    "chorus_model_failovers",
    "Model calls moved to the next key or endpoint, by reason "
    "(rate_limited, payment, server_error, timeout, unreachable).",
    ["reason"],
    registry=REGISTRY,
)
PROVIDER_RETRIES = Counter(
    "chorus_provider_retries",
    "Model call attempts retried, by reason (busy: 408/429/5xx, unreachable: connection).",
    ["reason"],
    registry=REGISTRY,
)
TOKENS = Counter(
    "chorus_tokens",
    "Tokens sent to the model (in), received from it as the answer (out) and as its thinking "
    "(reasoning), counted with the tokenizer.",
    ["direction"],
    registry=REGISTRY,
)
MODEL_PROMPT_TOKENS = Counter(
    "chorus_model_prompt_tokens",
    "Prompt tokens the model servers billed, by their prompt cache: read from it, written to it, "
    "none (uncached), or unknown (the server did not say), as the servers reported them.",
    ["cache"],
    registry=REGISTRY,
)
PROMPT_REUSE_TOKENS = Counter(
    "chorus_prompt_reuse_tokens",
    "Prompt tokens of the model calls by what the server did with them: reused from its prompt "
    "cache, evaluated afresh, or unknown (the server did not say).",
    ["reuse"],
    registry=REGISTRY,
)
PROMPT_PREFIX_BREAKS = Counter(
    "chorus_prompt_prefix_breaks",
    "Turn requests that did not start with the conversation's previous request, by reason: persona, "
    "model, snip, compact, collapse, window, tools, or unexpected.",
    ["reason"],
    registry=REGISTRY,
)
OVERFLOW_RECOVERIES = Counter(
    "chorus_overflow_recoveries",
    "Requests the model rejected as too large that were retried after folding a range.",
    registry=REGISTRY,
)
MODEL_WINDOW_LESSONS = Counter(
    "chorus_model_window_lessons",
    "What a model's answers taught its window: overflow (a smaller window learned from an error), "
    "narrowed (an error without numbers), stated (the server said it).",
    ["kind"],
    registry=REGISTRY,
)
SHED_PARTS = Counter(
    "chorus_context_shed",
    "Model calls whose context left a part out to fit the window, by part (tools, recall, memory, summary).",
    ["part"],
    registry=REGISTRY,
)
COMPACTIONS = Counter("chorus_compactions", "Compaction summaries stored.", registry=REGISTRY)
COLLAPSES = Counter("chorus_collapses", "Collapsed ranges stored.", registry=REGISTRY)
# Seconds the event loop woke late (bot/loop_lag.py): fine steps below the 50 ms that
# a person notices, coarse ones above it.
LOOP_LAG_BUCKETS = (
    0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1,
    0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10,
)  # fmt: skip
LOOP_LAG = Histogram(
    "chorus_event_loop_lag_seconds",
    "How late the event loop ran a 10 ms timer: time it spent on work that did not yield.",
    buckets=LOOP_LAG_BUCKETS,
    registry=REGISTRY,
)
MEMORY_OFFLOADS = Counter(
    "chorus_memory_offloads", "Memory offloads committed (items distilled and stored).", registry=REGISTRY
)
REMINDERS = Counter(
    "chorus_reminders",
    "Reminders by outcome: scheduled, delivered, late (delivered after Chorus was down), missed, failed.",
    ["outcome"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "chorus_tool_calls",
    'Tool calls the model made, by tool ("unknown" for names no offered tool has) and outcome.',
    ["tool", "outcome"],
    registry=REGISTRY,
)
TOOL_SECONDS = Histogram(
    "chorus_tool_seconds",
    "How long one tool call ran, by where the tool comes from (builtin, mcp:<server>).",
    ["source"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TOOL_APPROVALS = Counter(
    "chorus_tool_approvals",
    "Tool calls that waited for a person's yes or no, by what became of them: "
    "asked, approved, denied, expired (no answer in time) or cancelled (the turn stopped).",
    ["outcome"],
    registry=REGISTRY,
)
TOOL_STEPS = Histogram(
    "chorus_tool_steps",
    "Model calls of one turn that ended in tool calls (0 for a plain answer).",
    buckets=(0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32),
    registry=REGISTRY,
)

# Labelled by configured server name: as few as the operator configures.
MCP_SERVER_STATE = Gauge(
    "chorus_mcp_server_state",
    "1 for the state each MCP server is in (starting, ready, down, stopped), 0 for the others.",
    ["server", "state"],
    registry=REGISTRY,
)
MCP_CALLS = Counter(
    "chorus_mcp_calls",
    "Tool calls sent to an MCP server, by outcome (ok, error, down: the server could not take it).",
    ["server", "outcome"],
    registry=REGISTRY,
)
MCP_RESTARTS = Counter(
    "chorus_mcp_restarts", "MCP servers started again after a failure.", ["server"], registry=REGISTRY
)
SPEECH_SECONDS = Counter(
    "chorus_speech_seconds",
    "Seconds of audio heard by the speech service (transcribed) and spoken by it (synthesised).",
    ["direction"],
    registry=REGISTRY,
)
SPEECH_FAILURES = Counter(
    "chorus_speech_failures",
    "Voice notes not transcribed and replies not spoken, by direction and reason "
    "(no_service, unavailable, rejected, unreadable).",
    ["direction", "reason"],
    registry=REGISTRY,
)


class GaugeReader(Collector):
    """Gauges whose value is read at scrape time, e.g. the job queue of a runtime."""

    def __init__(self, gauges: Iterable[tuple[str, str, Callable[[], float]]]) -> None:
        self.gauges = list(gauges)

    def collect(self) -> Iterable[Metric]:
        for name, documentation, read in self.gauges:
            yield GaugeMetricFamily(name, documentation, value=read())


def render(*extra: Collector) -> bytes:
    """The text exposition of every instrument plus `extra` collectors."""
    registry = CollectorRegistry(auto_describe=True)
    for collector in (REGISTRY, *extra):
        registry.register(collector)
    return generate_latest(registry)
