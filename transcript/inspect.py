"""The `/context` report: what the model sees now, as plain text (docs/ARCHITECTURE.md §6, inspection)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from transcript.collapse import Collapse, Snip
from transcript.context import ContextStats
from transcript.prefix import PrefixHistory, prefix_line

_PREVIEW_CHARS = 80
NO_USAGE_LINE = "Last turn: reused: unknown (no usage reported)."


@dataclass(frozen=True)
class BilledTokens:
    """The prompt tokens a turn's model calls were billed, as the server reported them.

    `cache_read` is what the server reused from its prompt cache; None when it did not say
    (unknown, never the same as 0).
    """

    prompt: int  # all of them, cached ones included
    cache_read: int | None = None
    cache_write: int = 0

    @property
    def evaluated(self) -> int | None:
        """The prompt tokens the server computed afresh (those it wrote to the cache included)."""
        return None if self.cache_read is None else max(self.prompt - self.cache_read, 0)

    @property
    def uncached(self) -> int | None:
        return None if self.evaluated is None else max(self.evaluated - self.cache_write, 0)


@dataclass(frozen=True)
class ContextOverview:
    """Everything the report shows; the caller gathers it from the built context and records."""

    persona: str
    model: str
    window_tokens: int
    reply_reserve_tokens: int
    stats: ContextStats
    stored_messages: int  # stored rows, events included (the session's last seq)
    view_seqs: Sequence[int]  # seqs of the projected view's entries after the summary
    summary_last_seq: int | None = None
    summary_updates: int = 0
    collapses: Sequence[Collapse] = ()
    snips: Sequence[Snip] = ()
    compact_share: float = 0.7
    collapse_share: float = 0.85
    # The window's entries as (seq, who, opening words), for a model that wants to snip.
    entries: Sequence[tuple[int, str, str]] = ()
    # Voice notes and audio in the window as (seq, who, what the model reads of them).
    voice: Sequence[tuple[int, str, str]] = ()
    # Where the window comes from and how the count is calibrated, in one line.
    window_note: str = ""
    # The model's thinking before the latest reply: stored beside it, never part of the context.
    reasoning_tokens: int = 0
    # What the server billed for the last answered turn; None when it reported nothing.
    last_turn: BilledTokens | None = None
    # What this conversation's requests did to the prompt prefix; None: none since the start.
    prefix: PrefixHistory | None = None


def context_data(overview: ContextOverview) -> dict[str, object]:
    """The report as data (the `context_inspect` tool): the same facts, for a model to read."""
    stats = overview.stats
    budget = stats.budget_tokens or overview.window_tokens
    kept = list(stats.kept_seqs)
    return {
        "persona": overview.persona,
        "model": overview.model,
        "tokens": {
            "total": stats.total_tokens,
            "budget": budget,
            "window": overview.window_tokens,
            "reply_reserve": overview.reply_reserve_tokens,
            "by_part": dataclasses.asdict(stats.tokens),
            "window_note": overview.window_note,
        },
        "left_out": [str(note) for note in stats.shed],
        "messages": {
            "stored": overview.stored_messages,
            "in_window": len(kept),
            "window_seqs": _ranges(kept),
            "awaiting_summary": len([seq for seq in overview.view_seqs if kept and seq < kept[0]]),
            "newest_truncated": stats.newest_truncated,
            "window": [{"seq": seq, "from": who, "text": text} for seq, who, text in overview.entries],
        },
        "reasoning_tokens_last_reply": overview.reasoning_tokens,
        "voice": [{"seq": seq, "from": who, "heard": heard} for seq, who, heard in overview.voice],
        "summary_covers_up_to": overview.summary_last_seq,
        "collapsed": [
            {"from_seq": c.first_seq, "to_seq": c.last_seq, "summary": _preview(c.summary)}
            for c in overview.collapses
        ],
        "snipped": [{"from_seq": snip.first_seq, "to_seq": snip.last_seq} for snip in overview.snips],
        "compact_share": overview.compact_share,
        "collapse_share": overview.collapse_share,
        "last_turn_prompt_tokens": billed_data(overview.last_turn),
        "prompt_prefix": prefix_data(overview.prefix),
    }


def render_context_report(overview: ContextOverview) -> str:
    stats = overview.stats
    budget = stats.budget_tokens or overview.window_tokens
    share = stats.total_tokens / budget if budget else 0.0
    tokens = stats.tokens
    kept = list(stats.kept_seqs)
    waiting = [seq for seq in overview.view_seqs if kept and seq < kept[0]]
    lines = [
        f"Context for the next turn — {overview.persona}, model {overview.model}",
        f"Using {stats.total_tokens:,} of {budget:,} tokens ({share:.0%}); window "
        f"{overview.window_tokens:,}, {overview.reply_reserve_tokens:,} kept for the reply.",
        f"  system prompt  {tokens.system:>7,}",
        f"  summary        {tokens.summary:>7,}",
        f"  memory         {tokens.memory + tokens.recall:>7,}",
        f"  history        {tokens.history:>7,}",
        f"  attachments    {tokens.attachments + tokens.documents:>7,}",
        *([f"  tool schemas   {tokens.tools:>7,}"] if tokens.tools else []),
        *([f"Window: {overview.window_note}."] if overview.window_note else []),
        *(
            ["The window is tight; left out this turn:", *(f"  {note}" for note in stats.shed)]
            if stats.shed
            else []
        ),
        f"Messages: {overview.stored_messages} stored (events included); {len(kept)} in the window"
        + (f" ({_ranges(kept)})" if kept else "")
        + f"; {len(waiting)} out of the window awaiting the summary.",
    ]
    if overview.reasoning_tokens:
        lines.append(
            f"Thinking: {overview.reasoning_tokens:,} tokens before the last reply "
            "(kept beside it, never sent back to the model)."
        )
    lines.append(billed_line(overview.last_turn))
    lines.append(prefix_line(overview.prefix))
    if overview.summary_last_seq is not None:
        lines.append(
            f"Summary: covers messages up to #{overview.summary_last_seq} "
            f"({_plural(overview.summary_updates, 'update')})."
        )
    else:
        lines.append("Summary: none yet.")
    if overview.voice:
        lines.append(f"Voice and audio in the window ({len(overview.voice)}), as the model reads them:")
        lines.extend(f"  #{seq} {who}: {_preview(heard)}" for seq, who, heard in overview.voice)
    if overview.collapses:
        lines.append("Collapsed ranges:")
        lines.extend(f"  #{c.first_seq}–#{c.last_seq}: {_preview(c.summary)}" for c in overview.collapses)
    if overview.snips:
        ranges = ", ".join(_range(snip.first_seq, snip.last_seq) for snip in overview.snips)
        lines.append(f"Snipped (stored, not sent): {ranges}. /unsnip undoes the last snip.")
    lines.append(
        f"Auto-compaction above {overview.compact_share:.0%} of the budget, "
        f"background collapse above {overview.collapse_share:.0%}."
    )
    return "\n".join(lines)


def billed_line(billed: BilledTokens | None) -> str:
    """The last turn's prompt tokens: what the server reused of them and what it evaluated."""
    if billed is None:
        return NO_USAGE_LINE
    if billed.cache_read is None or billed.evaluated is None:
        return f"Last turn: {billed.prompt:,} prompt tokens; reused: unknown (the server did not say)."
    share = billed.cache_read / billed.prompt if billed.prompt else 0.0
    written = f", {billed.cache_write:,} of them written to the prompt cache" if billed.cache_write else ""
    return (
        f"Last turn: reused {billed.cache_read:,} of {billed.prompt:,} prompt tokens ({share:.0%}) "
        f"from the server's prompt cache; evaluated {billed.evaluated:,}{written}."
    )


def billed_data(billed: BilledTokens | None) -> dict[str, int | None] | None:
    """The last turn's prompt tokens as data; `reused` and `evaluated` None when unknown."""
    if billed is None:
        return None
    return {
        "total": billed.prompt,
        "reused": billed.cache_read,
        "evaluated": billed.evaluated,
        "cache_write": billed.cache_write,
        "uncached": billed.uncached,
    }


def prefix_data(history: PrefixHistory | None) -> dict[str, object] | None:
    """The prompt prefix's history as data; None when unknown (no two requests since the start)."""
    if history is None or not history.compared:
        return None
    change = history.last_change
    return {
        "compared": history.compared,
        "breaks": dict(history.breaks),
        "newest_broke": history.newest_broke,
        "last_break": None
        if change is None
        else {"part": change.part, "message": change.index, "reason": history.last_reason},
    }


def _ranges(seqs: Sequence[int]) -> str:
    """`#1, #4–#6` for [1, 4, 5, 6]: gaps (snips, events) stay visible."""
    spans: list[tuple[int, int]] = []
    for seq in seqs:
        if spans and seq == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], seq)
        else:
            spans.append((seq, seq))
    return ", ".join(_range(first, last) for first, last in spans)


def _range(first: int, last: int) -> str:
    return f"#{first}" if first == last else f"#{first}–#{last}"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW_CHARS else flat[: _PREVIEW_CHARS - 1] + "…"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
