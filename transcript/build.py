"""Stored rows → the model's messages for one turn: the transcript contract (docs/ARCHITECTURE.md §5)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from transcript.attachments import (
    RenderedDocument,
    image_part,
    image_placeholder,
    render_documents,
)
from transcript.audio import is_audio, render_audio
from transcript.budget import Budget, Capabilities
from transcript.context import PROVIDER_BLOCKS_KEY, Context, ContextStats, Message, TokensByPart
from transcript.preamble import DOCUMENTS_HEADING, Preamble, documents_section, preamble, section
from transcript.rows import AttachmentRef
from transcript.shedding import OptionalParts, shed
from transcript.shorten import shorten
from transcript.tokens import IMAGE_PART_TOKENS, MESSAGE_OVERHEAD_TOKENS, count_call_tokens, count_tokens
from transcript.turns import ERROR_PREFIX, Turn, TurnMemo, Unit, as_text_exchange, group_units, turn_of
from transcript.window import (
    RowLike,
    drop_oldest,
    first_user,
    row_field,
    step_mark,
    step_up,
    stepped_start,
)

# Heads the message that shows a vision model the images tools returned: only user
# messages may carry image parts in the OpenAI format.
TOOL_IMAGES_NOTE = "Images the tools above returned:"


class PersonaLike(Protocol):
    """The persona speaking this turn; `persona.Persona` satisfies it."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def system_prompt(self) -> str: ...


@dataclass(frozen=True)
class _Rendered:
    """A turn's message content and what it costs."""

    content: str
    image_urls: tuple[str, ...]
    text_tokens: int
    history_tokens: int
    attachment_tokens: int


def build_context(
    rows: Sequence[RowLike],
    *,
    persona: PersonaLike,
    budget: Budget,
    capabilities: Capabilities,
    group: bool = False,
    summary: str | None = None,
    memory: str | None = None,
    recall: Sequence[str] = (),
    documents: Sequence[AttachmentRef] = (),
    memo: TurnMemo | None = None,
    new_summary: str | None = None,
    new_memory: str | None = None,
) -> Context:
    """The messages the model sees this turn, oldest first, after one system message.

    `rows` are the session's recent stored rows, oldest first (TranscriptRow or
    mappings with the same fields). `documents` are all documents of the
    session: those whose message is outside the window are listed in the
    preamble, so every document comes back in every turn. The window keeps or drops
    whole units (a message, or a tool call with its results) and counts each unit
    once against `budget.max_messages`. The result depends only on the arguments, so
    equal arguments give byte-identical messages; `memo` (see `TurnMemo`) only saves
    converting rows an earlier build of the same turn converted. `new_summary` and
    `new_memory` were stored since the window's last step (`window_step_seq`): they follow
    the history, beside the newest user message, so the system message stays put.
    """
    convert = memo.turn_of if memo is not None else turn_of
    turns = [turn for row in rows if (turn := convert(row, group)) is not None]
    units = group_units(turns)
    if not capabilities.tools:
        units = [as_text_exchange(unit) for unit in units]
    recent_units = [tuple(_fitted(turn, budget) for turn in unit) for unit in _recent(units, budget)]
    recent = [turn for unit in recent_units for turn in unit]
    session_documents = _session_documents(documents, turns)
    rendered_documents = render_documents(
        reversed(session_documents),
        per_document=budget.document_tokens,
        total=budget.documents_total_tokens,
    )
    rendered = [_render(turn, _text_tokens(turn), rendered_documents, capabilities.vision) for turn in recent]
    system_tokens = MESSAGE_OVERHEAD_TOKENS + count_tokens(persona.system_prompt)
    spans = _spans(recent_units)
    roles = [unit[0].role for unit in recent_units]
    newest_user = max((i for i, role in enumerate(roles) if role == "user"), default=len(recent_units))
    if budget.max_tokens is not None:
        savings, documents_reserve = _token_savings(recent, rendered, session_documents, rendered_documents)
        unit_tokens = _per_unit(savings, spans)
        # The question and the turn's newest exchange always stay (see `_drop_within_turn`).
        kept_always = {newest_user, len(recent_units) - 1} & set(range(len(recent_units)))
        fitted = shed(
            OptionalParts(budget.tools, summary, memory, tuple(recall)),
            room=budget.max_tokens
            - system_tokens
            - documents_reserve
            - sum(unit_tokens[u] for u in kept_always),
            history_tokens=sum(size for unit, size in enumerate(unit_tokens) if unit not in kept_always),
            history_share=budget.history_share,
        )
        if fitted.notes:
            if capabilities.tools and budget.tools and not fitted.tools:
                # No tool is offered: the history's exchanges are shown as text.
                return _without_tools(
                    rows,
                    persona,
                    budget,
                    capabilities,
                    fitted,
                    group,
                    documents,
                    memo,
                    new_summary,
                    new_memory,
                )
            budget = dataclasses.replace(budget, tools=fitted.tools)
            summary, memory, recall = fitted.summary, fitted.memory, fitted.recall
    else:
        fitted = OptionalParts(budget.tools, summary, memory, tuple(recall))
    parts = preamble(persona.system_prompt, summary, memory, recall, new_summary, new_memory)
    summary_tokens, memory_tokens, recall_tokens = (
        count_tokens(parts.summary) + count_tokens(parts.new_summary),
        count_tokens(parts.memory) + count_tokens(parts.new_memory),
        count_tokens(parts.recall),
    )
    fixed_tokens = system_tokens + summary_tokens + memory_tokens + recall_tokens + budget.tools_tokens

    limits: list[tuple[Sequence[int], int]] = []
    if budget.max_tokens is not None:
        limits.append((unit_tokens, budget.max_tokens - fixed_tokens - documents_reserve))
    if budget.max_chars is not None:
        limits.append((_per_unit([len(r.content) for r in rendered], spans), budget.max_chars))
    # What the caps drop goes in steps too, so that the history holds for the next turns.
    within_budget = min(
        step_up(_first_seqs(recent_units), drop_oldest(limits, keep_from=newest_user), budget.window_stride),
        newest_user,
    )
    start = first_user(roles, within_budget)
    kept_units = _drop_within_turn(list(range(start, len(recent_units))), newest_user, limits)
    over_budget = set(range(within_budget)) | (set(range(start, len(recent_units))) - set(kept_units))
    kept_indices = [index for unit in kept_units for index in range(*spans[unit])]
    kept = [recent[index] for index in kept_indices]
    kept_rendered = [rendered[index] for index in kept_indices]

    earlier = _earlier_documents(session_documents, kept)
    documents_tokens = _documents_section_tokens(earlier, rendered_documents)
    parts = dataclasses.replace(
        parts,
        documents=documents_section([rendered_documents[d.sha256].text for d in earlier]),
    )

    newest_truncated = False
    question_tokens = question_excess = 0
    if newest_user < len(recent_units):
        index = kept_indices.index(spans[newest_user][0])
        question_tokens = kept_rendered[index].history_tokens + kept_rendered[index].attachment_tokens
        excess_tokens = excess_chars = 0
        if budget.max_tokens is not None:
            history_tokens = sum(r.history_tokens + r.attachment_tokens for r in kept_rendered)
            excess_tokens = fixed_tokens + documents_tokens + history_tokens - budget.max_tokens
            question_excess = max(excess_tokens, 0)
        if budget.max_chars is not None:
            excess_chars = sum(len(r.content) for r in kept_rendered) - budget.max_chars
        if excess_tokens > 0 or excess_chars > 0:
            text, text_tokens = shorten(
                kept[index].text,
                kept_rendered[index].text_tokens,
                excess_tokens=max(excess_tokens, 0),
                excess_chars=max(excess_chars, 0),
            )
            newest_truncated = text != kept[index].text
            newest = dataclasses.replace(kept[index], text=text)
            kept = [*kept[:index], newest, *kept[index + 1 :]]
            kept_rendered = [
                *kept_rendered[:index],
                _render(newest, text_tokens, rendered_documents, capabilities.vision),
                *kept_rendered[index + 1 :],
            ]

    tokens = TokensByPart(
        system=system_tokens,
        summary=summary_tokens,
        memory=memory_tokens,
        recall=recall_tokens,
        documents=documents_tokens,
        history=sum(r.history_tokens for r in kept_rendered),
        attachments=sum(r.attachment_tokens for r in kept_rendered),
        tools=budget.tools_tokens,
    )
    note_at = kept_indices.index(spans[newest_user][0]) if newest_user < len(recent_units) else None
    messages = [_system_message(parts), *_messages(kept, kept_rendered, parts.note(), note_at)]
    kept_rows = list({id(turn.row): turn.row for turn in kept}.values())
    rows_over_budget = {id(recent[index].row) for unit in over_budget for index in range(*spans[unit])}
    stats = ContextStats(
        messages_considered=len(rows),
        messages_kept=len(kept_rows),
        messages_dropped=len(rows) - len(kept_rows),
        dropped_for_budget=len(rows_over_budget),
        kept_seqs=tuple(seq for row in kept_rows if (seq := _seq(row)) is not None),
        newest_truncated=newest_truncated,
        tokens=tokens,
        total_tokens=sum(dataclasses.astuple(tokens)),
        budget_tokens=budget.max_tokens,
        shed=fitted.notes,
        question_tokens=question_tokens,
        question_excess_tokens=question_excess,
    )
    return Context(messages=messages, stats=stats, tools=tuple(tool.name for tool in budget.tools))


def _without_tools(
    rows: Sequence[RowLike],
    persona: PersonaLike,
    budget: Budget,
    capabilities: Capabilities,
    fitted: OptionalParts,
    group: bool,
    documents: Sequence[AttachmentRef],
    memo: TurnMemo | None,
    new_summary: str | None,
    new_memory: str | None,
) -> Context:
    """The context built again with no tool offered, noting that every schema gave way."""
    built = build_context(
        rows,
        persona=persona,
        budget=dataclasses.replace(budget, tools=()),
        capabilities=dataclasses.replace(capabilities, tools=False),
        group=group,
        summary=fitted.summary,
        memory=fitted.memory,
        recall=fitted.recall,
        documents=documents,
        memo=memo,
        new_summary=new_summary,
        new_memory=new_memory,
    )
    notes = (*fitted.notes, *built.stats.shed)
    return dataclasses.replace(built, stats=dataclasses.replace(built.stats, shed=notes))


def _recent(units: Sequence[Unit], budget: Budget) -> list[Unit]:
    """The units from the window's current step on, always with the newest person's message.

    A turn that called tools many times would otherwise push its own question out: then
    the question stays and its newest exchanges fill the rest (at least the last one).
    """
    max_messages = budget.max_messages
    start = stepped_start(_first_seqs(units), size=max_messages, low_water=budget.window_low_water)
    question = max((i for i, unit in enumerate(units) if unit[0].role == "user"), default=None)
    if question is None or question >= start:
        return list(units[start:])
    after = units[question + 1 :]
    return [units[question], *after[-max(max_messages - 1, 1) :]]


def _first_seqs(units: Sequence[Unit]) -> list[int]:
    """Each unit's first seq; rows without seqs count by position (as in tests' mappings)."""
    seqs = [_seq(unit[0].row) for unit in units]
    if all(seq is not None for seq in seqs):
        return [seq for seq in seqs if seq is not None]
    return list(range(1, len(units) + 1))


def window_step_seq(
    rows: Sequence[RowLike], *, budget: Budget, group: bool = False, memo: TurnMemo | None = None
) -> int | None:
    """The seq of the row from which on memory and summaries wait for the next window step.

    What was stored before this row goes into the system message; what came after it
    follows the history, beside the newest user message, until the window steps again (see
    `build_context`'s `new_summary` and `new_memory`). It is the first reply (or tool row) at
    a fixed distance from the window's mark: the reply just before the step, in a plain chat,
    or the conversation's first reply before the first step. A person's message is not
    taken: its time is when the platform says it was sent, not when it was stored. None when
    there is no such row yet (everything stored so far is steady) and for the rolling window,
    which moves every turn and keeps everything in the system message.
    """
    if budget.window_stride == 1:
        return None
    convert = memo.turn_of if memo is not None else turn_of
    units = _recent(group_units([turn for row in rows if (turn := convert(row, group)) is not None]), budget)
    first_seqs = _first_seqs(units)
    if not first_seqs:
        return None
    mark = step_mark(first_seqs[0], budget.window_stride)
    threshold = mark if mark == 1 else mark + max(budget.window_low_water - 2, 0)
    for unit, first in zip(units, first_seqs, strict=True):
        for offset, turn in enumerate(unit):
            seq = _seq(turn.row)
            position = seq if seq is not None else first + offset
            if turn.role != "user" and position >= threshold:
                return position
    return None


def _drop_within_turn(
    kept: list[int], newest_user: int, limits: Sequence[tuple[Sequence[int], int]]
) -> list[int]:
    """`kept` without the oldest exchanges after the question, while the caps still do not fit.

    The question and the newest unit always stay: the model needs the ask and what its
    last call returned.
    """
    totals = [sum(sizes[unit] for unit in kept) for sizes, _ in limits]
    middle = [unit for unit in kept if newest_user < unit < kept[-1]] if kept else []
    while middle and any(total > cap for total, (_, cap) in zip(totals, limits, strict=True)):
        dropped = middle.pop(0)
        kept.remove(dropped)
        totals = [total - sizes[dropped] for total, (sizes, _) in zip(totals, limits, strict=True)]
    return kept


def _spans(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """Each unit's [start, end) in the flattened list of turns."""
    spans: list[tuple[int, int]] = []
    start = 0
    for unit in units:
        spans.append((start, start + len(unit)))
        start += len(unit)
    return spans


def _per_unit(sizes: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[int]:
    return [sum(sizes[start:end]) for start, end in spans]


def _fitted(turn: Turn, budget: Budget) -> Turn:
    """A tool result cut in the middle to `budget.tool_result_tokens` (it stays stored whole)."""
    if turn.role != "tool":
        return turn
    tokens = turn.tokens if turn.tokens is not None else count_tokens(turn.text)
    if tokens <= budget.tool_result_tokens:
        return turn
    text, _ = shorten(turn.text, tokens, excess_tokens=tokens - budget.tool_result_tokens, excess_chars=0)
    return dataclasses.replace(turn, text=text, tokens=None)


def _text_tokens(turn: Turn) -> int:
    """Tokens of what the model reads of the turn's text and calls: stored at write, else counted."""
    if turn.tokens is not None:
        tokens = turn.tokens
    else:
        tokens = count_tokens(turn.text) + count_call_tokens(turn.tool_calls)
    return tokens + count_tokens(ERROR_PREFIX) if turn.failed else tokens


def _seq(row: RowLike) -> int | None:
    seq = row_field(row, "seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _session_documents(documents: Sequence[AttachmentRef], turns: Sequence[Turn]) -> list[AttachmentRef]:
    """Every document of the session, oldest first, each file (by content hash) once.

    Documents in the rows count too, so a caller that passes no `documents`
    still keeps those of rows that fall out of the window.
    """
    seen: set[str] = set()
    ordered: list[AttachmentRef] = []
    row_documents = (a for turn in turns for a in turn.attachments)
    for attachment in itertools.chain(documents, row_documents):
        if attachment.kind == "document" and attachment.sha256 not in seen:
            seen.add(attachment.sha256)
            ordered.append(attachment)
    return ordered


def _earlier_documents(
    session_documents: Sequence[AttachmentRef], kept: Sequence[Turn]
) -> list[AttachmentRef]:
    """Documents no kept message carries: they go to the preamble."""
    in_window = {a.sha256 for turn in kept for a in turn.attachments if a.kind == "document"}
    return [d for d in session_documents if d.sha256 not in in_window]


def _documents_section_tokens(
    earlier: Sequence[AttachmentRef], rendered_documents: dict[str, RenderedDocument]
) -> int:
    if not earlier:
        return 0
    return _documents_heading_tokens() + sum(rendered_documents[d.sha256].tokens for d in earlier)


def _documents_heading_tokens() -> int:
    return count_tokens(section(DOCUMENTS_HEADING, ""))


def _token_savings(
    recent: Sequence[Turn],
    rendered: Sequence[_Rendered],
    session_documents: Sequence[AttachmentRef],
    rendered_documents: dict[str, RenderedDocument],
) -> tuple[list[int], int]:
    """What dropping each turn saves, and the tokens documents cost wherever they end up.

    A dropped turn's documents move to the preamble unless a newer kept turn
    still carries them, so dropping saves the turn's cost minus those documents
    (and minus the section heading, for the first to move). Documents thus cost
    the same in a message or in the preamble: a reserve taken off the budget.
    """
    newest_holder: dict[str, int] = {}
    for index, turn in enumerate(recent):
        for attachment in turn.attachments:
            if attachment.kind == "document":
                newest_holder[attachment.sha256] = index
    earlier = [d for d in session_documents if d.sha256 not in newest_holder]
    moved = [0] * len(recent)
    for sha256, index in newest_holder.items():
        moved[index] += rendered_documents[sha256].tokens
    reserve = _documents_section_tokens(earlier, rendered_documents)
    savings = []
    for index, cost in enumerate(rendered):
        moving = moved[index]
        if moving and not reserve:
            moving += _documents_heading_tokens()
        reserve += moving
        savings.append(cost.history_tokens + cost.attachment_tokens - moving)
    return savings, reserve


def _render(
    turn: Turn,
    text_tokens: int,
    rendered_documents: dict[str, RenderedDocument],
    vision: bool,
) -> _Rendered:
    text = turn.model_text
    blocks = [text] if text else []
    image_urls: list[str] = []
    attachment_tokens = 0
    for attachment in turn.attachments:
        if attachment.kind == "document":
            document = rendered_documents[attachment.sha256]
            blocks.append(document.text)
            attachment_tokens += document.tokens
        elif is_audio(attachment):
            heard = render_audio(attachment)
            blocks.append(heard)
            attachment_tokens += count_tokens(heard)
        elif vision and turn.role in ("user", "tool") and attachment.data_url:
            # Only user messages may carry image parts in the OpenAI format: a tool's
            # images follow its exchange in a user message of their own.
            if turn.role == "tool" and not image_urls:
                attachment_tokens += MESSAGE_OVERHEAD_TOKENS + count_tokens(TOOL_IMAGES_NOTE)
            image_urls.append(attachment.data_url)
            attachment_tokens += IMAGE_PART_TOKENS
        else:
            placeholder = image_placeholder(attachment)
            blocks.append(placeholder)
            attachment_tokens += count_tokens(placeholder)
    history_tokens = MESSAGE_OVERHEAD_TOKENS + text_tokens
    if turn.name:
        history_tokens += count_tokens(turn.name)
    if turn.prefix:
        history_tokens += count_tokens(turn.prefix)
    return _Rendered(
        content=turn.prefix + "\n\n".join(blocks),
        image_urls=tuple(image_urls),
        text_tokens=text_tokens,
        history_tokens=history_tokens,
        attachment_tokens=attachment_tokens,
    )


def _messages(
    kept: Sequence[Turn], rendered: Sequence[_Rendered], note: str, note_at: int | None
) -> list[Message]:
    """The kept turns as messages; the images of an exchange's results follow its last result.

    The turn's `note` (recall, earlier documents) follows the text of the kept turn at
    `note_at`, the newest user message: after the history, so what a server cached of the
    history stays a prefix. Without a user message it is a user message of its own, last.
    """
    messages: list[Message] = []
    tool_images: list[str] = []
    for index, (turn, shown) in enumerate(zip(kept, rendered, strict=True)):
        message = _message(turn, shown)
        messages.append(_with_note(message, note) if index == note_at else message)
        if turn.role == "tool":
            tool_images.extend(shown.image_urls)
            exchange_ends = index + 1 == len(kept) or kept[index + 1].role != "tool"
            if exchange_ends and tool_images:
                heading: list[dict[str, object]] = [{"type": "text", "text": TOOL_IMAGES_NOTE}]
                messages.append(
                    {"role": "user", "content": [*heading, *(image_part(url) for url in tool_images)]}
                )
                tool_images = []
    if note and note_at is None:
        messages.append({"role": "user", "content": note})
    return messages


def _with_note(message: Message, note: str) -> Message:
    """`message` with `note` after its text (a text part of its own beside images)."""
    if not note:
        return message
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": note}]}
    return {**message, "content": f"{content}\n\n{note}" if content else note}


def _message(turn: Turn, rendered: _Rendered) -> Message:
    if turn.role == "tool":
        return {"role": "tool", "tool_call_id": turn.tool_call_id, "content": rendered.content}
    content: str | list[dict[str, object]] | None = rendered.content
    if rendered.image_urls:
        text_part: list[dict[str, object]] = (
            [{"type": "text", "text": rendered.content}] if rendered.content else []
        )
        content = [*text_part, *(image_part(url) for url in rendered.image_urls)]
    if turn.tool_calls and not rendered.content:
        # The API's shape for a call without words: no content at all.
        content = None
    message: Message = {"role": turn.role, "content": content}
    if turn.name:
        message["name"] = turn.name
    if turn.tool_calls:
        message["tool_calls"] = [
            {"type": "function", "id": call.id, "function": {"name": call.name, "arguments": call.arguments}}
            for call in turn.tool_calls
        ]
    if turn.provider_blocks is not None:
        message[PROVIDER_BLOCKS_KEY] = turn.provider_blocks
    return message


def _system_message(parts: Preamble) -> Message:
    return {"role": "system", "content": parts.text()}
