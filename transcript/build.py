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
from transcript.budget import Budget, Capabilities
from transcript.context import Context, ContextStats, Message, TokensByPart
from transcript.kinds import EVENT_KINDS, KIND_ROLES, UnknownMessageKind, message_role
from transcript.names import sanitise_name
from transcript.preamble import DOCUMENTS_HEADING, Preamble, documents_section, preamble, section
from transcript.rows import AttachmentRef
from transcript.shorten import shorten
from transcript.tokens import IMAGE_PART_TOKENS, MESSAGE_OVERHEAD_TOKENS, count_tokens
from transcript.window import RowLike, drop_oldest, first_user, row_field, row_kind, row_tokens


class PersonaLike(Protocol):
    """The persona speaking this turn; `persona.Persona` satisfies it."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def system_prompt(self) -> str: ...


@dataclass(frozen=True)
class _Turn:
    """A well-formed stored row, in the model's vocabulary."""

    row: RowLike
    role: str
    text: str
    name: str | None
    # The sender's display name as a content prefix, for group chats.
    prefix: str
    attachments: tuple[AttachmentRef, ...]


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
) -> Context:
    """The messages the model sees this turn, oldest first, after one system message.

    `rows` are the session's recent stored rows, oldest first (TranscriptRow or
    mappings with the same fields). `documents` are all documents of the
    session: those whose message is outside the window are listed in the
    preamble, so every document comes back in every turn. The result depends
    only on the arguments, so equal arguments give byte-identical messages.
    """
    turns = [turn for row in rows if (turn := _turn(row, group)) is not None]
    recent = turns[-budget.max_messages :]
    session_documents = _session_documents(documents, turns)
    rendered_documents = render_documents(
        reversed(session_documents),
        per_document=budget.document_tokens,
        total=budget.documents_total_tokens,
    )
    rendered = [
        _render(turn, row_tokens(turn.row, turn.text), rendered_documents, capabilities.vision)
        for turn in recent
    ]
    parts = preamble(persona.system_prompt, summary, memory, recall)
    system_tokens = MESSAGE_OVERHEAD_TOKENS + count_tokens(parts.system)
    summary_tokens, memory_tokens, recall_tokens = (
        count_tokens(parts.summary),
        count_tokens(parts.memory),
        count_tokens(parts.recall),
    )
    fixed_tokens = system_tokens + summary_tokens + memory_tokens + recall_tokens

    roles = [turn.role for turn in recent]
    newest_user = max((i for i, role in enumerate(roles) if role == "user"), default=len(recent))
    limits: list[tuple[Sequence[int], int]] = []
    if budget.max_tokens is not None:
        savings, documents_reserve = _token_savings(recent, rendered, session_documents, rendered_documents)
        limits.append((savings, budget.max_tokens - fixed_tokens - documents_reserve))
    if budget.max_chars is not None:
        limits.append(([len(r.content) for r in rendered], budget.max_chars))
    start = first_user(roles, drop_oldest(limits, keep_from=newest_user))
    kept, kept_rendered = recent[start:], rendered[start:]

    earlier = _earlier_documents(session_documents, kept)
    documents_tokens = _documents_section_tokens(earlier, rendered_documents)
    parts = dataclasses.replace(
        parts,
        documents=documents_section([rendered_documents[d.sha256].text for d in earlier]),
    )

    newest_truncated = False
    if newest_user < len(recent):
        index = newest_user - start
        excess_tokens = excess_chars = 0
        if budget.max_tokens is not None:
            history_tokens = sum(r.history_tokens + r.attachment_tokens for r in kept_rendered)
            excess_tokens = fixed_tokens + documents_tokens + history_tokens - budget.max_tokens
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
    )
    messages = [_system_message(parts)] + [
        _message(turn, r) for turn, r in zip(kept, kept_rendered, strict=True)
    ]
    stats = ContextStats(
        messages_considered=len(rows),
        messages_kept=len(kept),
        messages_dropped=len(rows) - len(kept),
        kept_seqs=tuple(seq for turn in kept if (seq := _seq(turn.row)) is not None),
        newest_truncated=newest_truncated,
        tokens=tokens,
        total_tokens=sum(dataclasses.astuple(tokens)),
        budget_tokens=budget.max_tokens,
    )
    return Context(messages=messages, stats=stats)


def _turn(row: RowLike, group: bool) -> _Turn | None:
    """The row as a model turn, or None when it must not reach the model.

    Raises `UnknownMessageKind` for a kind or role this package does not know: a row is
    never sent as something it might not be.
    """
    kind, role = row_kind(row), message_role(row_field(row, "role"))
    if role not in KIND_ROLES[kind]:
        raise UnknownMessageKind(f"a {kind!r} row cannot have role {role!r}")
    if kind in EVENT_KINDS:
        return None
    content = row_field(row, "content")
    if not isinstance(content, str):
        return None
    stored = row_field(row, "attachments")
    attachments = tuple(
        a for a in (stored if isinstance(stored, tuple | list) else ()) if isinstance(a, AttachmentRef)
    )
    if not content.strip() and not attachments:
        return None
    if role == "assistant":
        # Tagged with the persona that spoke then, not the current one, so a
        # switched-to persona does not claim its predecessor's words.
        return _Turn(row, "assistant", content, _name(row_field(row, "persona_id")), "", attachments)
    sender = row_field(row, "sender_name")
    # Many models ignore `name`; in a group the display name must be in the text.
    prefix = f"{sender}: " if group and isinstance(sender, str) and sender else ""
    return _Turn(row, "user", content, _name(sender), prefix, attachments)


def _name(value: object) -> str | None:
    return sanitise_name(value) if isinstance(value, str) and value else None


def _seq(row: RowLike) -> int | None:
    seq = row_field(row, "seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _session_documents(documents: Sequence[AttachmentRef], turns: Sequence[_Turn]) -> list[AttachmentRef]:
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
    session_documents: Sequence[AttachmentRef], kept: Sequence[_Turn]
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
    recent: Sequence[_Turn],
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
    turn: _Turn,
    text_tokens: int,
    rendered_documents: dict[str, RenderedDocument],
    vision: bool,
) -> _Rendered:
    blocks = [turn.text] if turn.text else []
    image_urls: list[str] = []
    attachment_tokens = 0
    for attachment in turn.attachments:
        if attachment.kind == "document":
            document = rendered_documents[attachment.sha256]
            blocks.append(document.text)
            attachment_tokens += document.tokens
        elif vision and turn.role == "user" and attachment.data_url:
            # Only user messages may carry image parts in the OpenAI format.
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


def _message(turn: _Turn, rendered: _Rendered) -> Message:
    content: str | list[dict[str, object]] = rendered.content
    if rendered.image_urls:
        text_part: list[dict[str, object]] = (
            [{"type": "text", "text": rendered.content}] if rendered.content else []
        )
        content = [*text_part, *(image_part(url) for url in rendered.image_urls)]
    message: Message = {"role": turn.role, "content": content}
    if turn.name:
        message["name"] = turn.name
    return message


def _system_message(parts: Preamble) -> Message:
    return {"role": "system", "content": parts.text()}
