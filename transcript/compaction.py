"""Compaction (docs/ARCHITECTURE.md §6): fold older messages into one model-written summary.

Pure planning and algorithms: which rows to summarise, how to chunk them by
tokens, the prompts, and the progressive / staged / fallback summarisation
chain. The caller passes the summariser (a coroutine taking prompt messages),
so nothing here does I/O; a summariser that fails or returns nothing degrades
to a plain statement and never to an empty summary.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from transcript.after_turn import after_turn_messages
from transcript.audio import is_audio, render_audio
from transcript.collapse import Collapse, Snip, is_snipped
from transcript.context import Message
from transcript.exchanges import exchange_spans, snap_cut, units_of
from transcript.kinds import is_conversation
from transcript.rows import TranscriptRow
from transcript.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens, truncate_to_tokens

log = logging.getLogger(__name__)

# A tool result enters a summary's input at most this long.
RESULT_LINE_TOKENS = 200
# The model's window when none is configured for it.
# A chunk may use at most this share of the window ...
BASE_CHUNK_RATIO = 0.4
# ... and never less than this share, however large the messages are.
MIN_CHUNK_RATIO = 0.15
# Estimates err low on code and non-English text; chunks keep 20 % spare.
SAFETY_MARGIN = 1.2
# A message above this share of the window is "oversized": the fallback leaves it out.
OVERSIZED_SHARE = 0.5
# At most this many identifiers are listed when no summary could be written.
MAX_LISTED_IDENTIFIERS = 40

NO_HISTORY = "No earlier conversation."

SUMMARY_INSTRUCTIONS = """\
You maintain the running summary of a chat conversation so that it can continue \
coherently after older messages leave the model's view. Write the updated, complete \
summary. Keep, as short bullet points:
- decisions and conclusions reached;
- open TODOs, unanswered questions and pending requests (who asked for what);
- constraints and preferences people stated;
- exact identifiers, copied verbatim: URLs, ids, file paths, names, numbers, dates, amounts.
Stay neutral: you are not any of the personas in the conversation. Write in the third \
person and attribute statements to who made them (by name, and for the assistant by \
persona). Output only the summary, with no preamble."""

MERGE_INSTRUCTIONS = (
    "Merge the partial summaries below into one coherent, complete summary. Keep every "
    "decision, open TODO, pending request, constraint and exact identifier they contain."
)

# Anything a reader may need to copy exactly: URLs, e-mail addresses, paths,
# long numbers and code-like ids (with a digit, dash or underscore inside).
_IDENTIFIER = re.compile(
    r"https?://\S+[^\s.,;:!?)\]}'\"]"
    r"|[\w.+-]+@[\w-]+\.[\w.-]+"
    r"|(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)+"
    r"|\b[A-Za-z]+[-_][\w-]*\d[\w-]*\b"
    r"|\b\w*\d\w*[-_]\w+\b"
    r"|\b\d[\d,.:/-]{3,}\d\b"
)

Summarise = Callable[[list[Message]], Awaitable[str]]


class SummaryFailed(Exception):
    """The summariser failed or returned nothing after every allowed attempt."""


@dataclass(frozen=True)
class SummaryItem:
    """One message as the summariser reads it, with its token cost."""

    seq: int
    line: str
    tokens: int


def summary_line(row: TranscriptRow) -> str | None:
    """`#12 Alice (user): text` — the speaker is always named, so the summary can attribute.

    Stored events, failed turns and empty rows are not part of the conversation. A tool
    call names the tool and its arguments; a result is shortened, since the summary
    keeps what was found, not every byte of it.
    """
    if not is_conversation(row.kind):
        return None
    # What a voice note said is part of the conversation the summary keeps.
    notes = [render_audio(a) if is_audio(a) else f"[{a.kind}: {a.filename}]" for a in row.attachments]
    calls = [f"[called {call.name} {call.arguments}]" for call in row.tool_calls]
    content = row.content.strip()
    if row.kind == "tool_result":
        content = truncate_to_tokens(content, RESULT_LINE_TOKENS)
        outcome = "failed" if row.status == "failed" else "returned"
        return f"#{row.seq} tool {row.tool_name or 'result'} {outcome}: {content}"
    text = " ".join(part for part in (content, *calls, *notes) if part)
    if not text:
        return None
    if row.role == "assistant":
        persona = row.persona_id or "unknown"
        speaker = f"{row.sender_name or persona} (assistant, persona {persona})"
    else:
        speaker = f"{row.sender_name or 'someone'} (user)"
    return f"#{row.seq} {speaker}: {text}"


def summary_items(rows: Sequence[TranscriptRow]) -> list[SummaryItem]:
    items = []
    for row in rows:
        line = summary_line(row)
        if line is not None:
            items.append(SummaryItem(row.seq, line, estimate_tokens(line)))
    return items


def estimate_tokens(text: str) -> int:
    """Real tokenizer count plus the per-message overhead."""
    return count_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def total_tokens(items: Sequence[SummaryItem]) -> int:
    return sum(item.tokens for item in items)


# --- chunking ----------------------------------------------------------------


def split_by_token_share(items: Sequence[SummaryItem], parts: int = 2) -> list[list[SummaryItem]]:
    """`items` in at most `parts` consecutive chunks of about equal tokens, none empty."""
    if not items:
        return []
    parts = min(max(1, parts), len(items))
    if parts == 1:
        return [list(items)]
    target = total_tokens(items) / parts
    chunks: list[list[SummaryItem]] = []
    current: list[SummaryItem] = []
    current_tokens = 0
    for item in items:
        if len(chunks) < parts - 1 and current and current_tokens + item.tokens > target:
            chunks.append(current)
            current, current_tokens = [], 0
        current.append(item)
        current_tokens += item.tokens
    chunks.append(current)
    return chunks


def chunk_by_max_tokens(items: Sequence[SummaryItem], max_tokens: int) -> list[list[SummaryItem]]:
    """Consecutive chunks within `max_tokens` (less the safety margin); an oversized
    message gets a chunk of its own."""
    effective_max = max(1, math.floor(max_tokens / SAFETY_MARGIN))
    chunks: list[list[SummaryItem]] = []
    current: list[SummaryItem] = []
    current_tokens = 0
    for item in items:
        if current and current_tokens + item.tokens > effective_max:
            chunks.append(current)
            current, current_tokens = [], 0
        current.append(item)
        current_tokens += item.tokens
        if item.tokens > effective_max:
            chunks.append(current)
            current, current_tokens = [], 0
    if current:
        chunks.append(current)
    return chunks


def adaptive_chunk_ratio(items: Sequence[SummaryItem], context_window: int) -> float:
    """The share of the window one chunk may use: smaller when messages are large,
    so a chunk plus the prompt still fits the summariser's window."""
    if not items:
        return BASE_CHUNK_RATIO
    average = total_tokens(items) / len(items) * SAFETY_MARGIN
    average_share = average / max(context_window, 1)
    if average_share > 0.1:
        reduction = min(average_share * 2, BASE_CHUNK_RATIO - MIN_CHUNK_RATIO)
        return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - reduction)
    return BASE_CHUNK_RATIO


def max_chunk_tokens(items: Sequence[SummaryItem], context_window: int) -> int:
    return max(1, math.floor(context_window * adaptive_chunk_ratio(items, context_window)))


# --- prompts -----------------------------------------------------------------


def summary_request(
    items: Sequence[SummaryItem],
    previous: str | None = None,
    instructions: str = SUMMARY_INSTRUCTIONS,
    focus: str | None = None,
    target_tokens: int | None = None,
    prefix: Sequence[Message] = (),
) -> list[Message]:
    """The messages of one summariser call: update `previous` with `items`.

    `prefix`: the conversation's last request and its reply (`transcript.after_turn`), so the
    server serves it from its cache; the instructions, what to fold in and the ask follow
    in one user message, last.
    """
    text = instructions
    if target_tokens:
        text += f"\nKeep it under about {max(target_tokens * 3 // 4, 20)} words."
    if focus:
        text += f"\nThe reader asked to focus on: {focus}"
    body = ""
    if previous:
        body += f"Summary so far:\n{previous}\n\n"
    body += "Conversation to fold in:\n" + "\n".join(item.line for item in items)
    body += "\n\nWrite the updated complete summary."
    return after_turn_messages(prefix, f"{text}\n\n{body}")


def fit_summary(text: str, max_tokens: int) -> str:
    """`text` within `max_tokens`: its beginning and end kept, the middle marked as cut.

    Repeated fallbacks append to the previous summary; without a cap it would
    eventually crowd the conversation out of the window.
    """
    total = count_tokens(text)
    if total <= max_tokens:
        return text
    note = "\n[… part of the earlier summary was cut to fit …]\n"
    half = max((max_tokens - count_tokens(note)) // 2, 1)
    tail = text[len(text) - len(text) * half // total :]
    return truncate_to_tokens(truncate_to_tokens(text, half) + note + tail, max_tokens)


def extract_identifiers(texts: Sequence[str]) -> list[str]:
    """Identifiers in `texts`, in order of first appearance, each once."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in _IDENTIFIER.finditer(text):
            seen.setdefault(match.group(0), None)
    return list(seen)


def unsummarised_statement(items: Sequence[SummaryItem], oversized: int, previous: str | None) -> str:
    """The last fallback: what could not be summarised, its speakers and identifiers, verbatim."""
    first, last = items[0].seq, items[-1].seq
    statement = (
        f"[Messages #{first}–#{last} ({len(items)} messages"
        + (f", {oversized} very large" if oversized else "")
        + ") could not be summarised; they stay in the stored transcript.]"
    )
    identifiers = extract_identifiers([item.line for item in items])[:MAX_LISTED_IDENTIFIERS]
    if identifiers:
        statement += "\nIdentifiers mentioned there: " + ", ".join(identifiers)
    return f"{previous}\n\n{statement}" if previous else statement


# --- the summarisation chain ---------------------------------------------------


@dataclass
class SummaryRun:
    """One compaction's summariser calls: retries per call and a cap on all calls."""

    summarise: Summarise
    attempts: int = 2
    max_calls: int = 24
    target_tokens: int | None = None
    # What every call starts with: the conversation's last request and its reply (none: the
    # instruction alone).
    prefix: Sequence[Message] = ()
    calls: int = 0
    failures: int = 0
    fallbacks: list[str] = field(default_factory=list)

    async def call(self, messages: list[Message]) -> str:
        for _ in range(max(self.attempts, 1)):
            if self.calls >= self.max_calls:
                break
            self.calls += 1
            try:
                text = (await self.summarise(messages)).strip()
            except Exception:
                # Whatever the summariser raised, the chain degrades instead of blocking a chat;
                # the traceback is kept for the operator.
                log.warning("summariser call %d failed", self.calls, exc_info=True)
                text = ""
            if text:
                return text
            self.failures += 1
        raise SummaryFailed(f"no summary after {self.calls} calls")


async def summarise_progressively(
    run: SummaryRun,
    items: Sequence[SummaryItem],
    *,
    chunk_tokens: int,
    previous: str | None,
    instructions: str = SUMMARY_INSTRUCTIONS,
    focus: str | None = None,
) -> str:
    """Each chunk updates the summary the previous chunk left."""
    summary = previous
    for chunk in chunk_by_max_tokens(items, chunk_tokens):
        summary = await run.call(
            summary_request(chunk, summary, instructions, focus, run.target_tokens, run.prefix)
        )
    return summary or previous or NO_HISTORY


async def summarise_with_fallback(
    run: SummaryRun,
    items: Sequence[SummaryItem],
    *,
    chunk_tokens: int,
    context_window: int,
    previous: str | None = None,
    instructions: str = SUMMARY_INSTRUCTIONS,
    focus: str | None = None,
) -> str:
    """Progressive summary; else without oversized messages (noted); else a plain statement."""
    if not items:
        return previous or NO_HISTORY
    try:
        return await summarise_progressively(
            run, items, chunk_tokens=chunk_tokens, previous=previous, instructions=instructions, focus=focus
        )
    except SummaryFailed:
        pass
    limit = context_window * OVERSIZED_SHARE
    small = [item for item in items if item.tokens * SAFETY_MARGIN <= limit]
    oversized = [item for item in items if item.tokens * SAFETY_MARGIN > limit]
    if oversized and small:
        run.fallbacks.append("left out oversized messages")
        try:
            partial = await summarise_progressively(
                run,
                small,
                chunk_tokens=chunk_tokens,
                previous=previous,
                instructions=instructions,
                focus=focus,
            )
            notes = [
                f"[#{item.seq}: a very large message (~{round(item.tokens * SAFETY_MARGIN / 1000)}K tokens) "
                "was left out of this summary]"
                for item in oversized
            ]
            return partial + "\n\n" + "\n".join(notes)
        except SummaryFailed:
            pass
    run.fallbacks.append("plain statement")
    return unsummarised_statement(items, len(oversized), previous)


async def summarise_in_stages(
    run: SummaryRun,
    items: Sequence[SummaryItem],
    *,
    chunk_tokens: int,
    context_window: int,
    previous: str | None = None,
    focus: str | None = None,
    parts: int = 2,
) -> str:
    """Large inputs: summarise `parts` token-equal stages separately, then merge them
    (with the previous summary) into one. Small inputs: one progressive pass."""
    if not items:
        return previous or NO_HISTORY
    parts = min(max(1, parts), len(items))
    if parts <= 1 or len(items) < 4 or total_tokens(items) <= chunk_tokens:
        return await summarise_with_fallback(
            run,
            items,
            chunk_tokens=chunk_tokens,
            context_window=context_window,
            previous=previous,
            focus=focus,
        )
    partials = [
        await summarise_with_fallback(
            run, stage, chunk_tokens=chunk_tokens, context_window=context_window, focus=focus
        )
        for stage in split_by_token_share(items, parts)
    ]
    labelled = [
        SummaryItem(seq=index, line=f"Partial summary {index}:\n{text}", tokens=estimate_tokens(text))
        for index, text in enumerate(partials, start=1)
    ]
    try:
        return await summarise_progressively(
            run,
            labelled,
            chunk_tokens=max(chunk_tokens, total_tokens(labelled) + 1),
            previous=previous,
            instructions=MERGE_INSTRUCTIONS + "\n\n" + SUMMARY_INSTRUCTIONS,
            focus=focus,
        )
    except SummaryFailed:
        # The stages are summaries already: keeping them side by side loses nothing.
        run.fallbacks.append("stages kept unmerged")
        return "\n\n".join(part for part in (previous, *partials) if part)


# --- planning ------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPlan:
    """Fold rows after the previous summary up to `last_seq` into an updated summary."""

    first_seq: int  # where this update picks up: the previous summary's last_seq + 1
    last_seq: int  # every message up to here is covered afterwards
    rows: tuple[TranscriptRow, ...]  # what the summariser reads (snipped rows left out)


def keep_recent_cut(rows: Sequence[TranscriptRow], keep_recent: int, snips: Sequence[Snip] = ()) -> int:
    """The last seq to compact so that the newest `keep_recent` units stay verbatim.

    A unit is a message or a whole tool exchange, as the window counts them.
    """
    units = [unit for unit in units_of(rows) if not is_snipped(unit[0].seq, snips)]
    if len(units) <= keep_recent:
        return 0
    return units[len(units) - keep_recent - 1][-1].seq if keep_recent > 0 else units[-1][-1].seq


def plan_compaction(
    rows: Sequence[TranscriptRow],
    *,
    previous_last_seq: int,
    cut_seq: int,
    collapses: Sequence[Collapse] = (),
    snips: Sequence[Snip] = (),
) -> CompactionPlan | None:
    """What to summarise so that everything up to `cut_seq` is covered, or None.

    The cut never splits a collapsed range or a tool exchange: it moves back to just
    before it, so every range is either wholly in the summary or wholly in the view.
    """
    for collapse in collapses:
        if collapse.first_seq <= cut_seq < collapse.last_seq:
            cut_seq = collapse.first_seq - 1
    cut_seq = snap_cut(cut_seq, exchange_spans(rows))
    if cut_seq <= previous_last_seq:
        return None
    chosen = tuple(
        row
        for row in rows
        if previous_last_seq < row.seq <= cut_seq
        and summary_line(row) is not None
        and not is_snipped(row.seq, snips)
    )
    if not chosen:
        return None
    return CompactionPlan(first_seq=previous_last_seq + 1, last_seq=cut_seq, rows=chosen)
