"""How attachments reach the model: image parts or placeholders, document text within budgets."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from transcript.rows import AttachmentRef
from transcript.tokens import count_tokens, truncate_to_tokens


@dataclass(frozen=True)
class RenderedDocument:
    """A document as the model reads it, wherever in the context it appears."""

    text: str
    tokens: int
    # Tokens of the document's own text, drawn from the documents budget.
    text_tokens: int


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def describe(attachment: AttachmentRef) -> str:
    return f"{attachment.filename}, {attachment.mime_type}, {format_size(attachment.size)}"


def image_placeholder(image: AttachmentRef) -> str:
    return f"[image: {describe(image)}]"


def image_part(data_url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": data_url}}


# Documents come back every turn; caching spares re-tokenising the same text.
@functools.lru_cache(maxsize=128)
def render_document(document: AttachmentRef, allowance: int) -> RenderedDocument:
    """`document` with at most `allowance` tokens of its text, or a placeholder naming it."""
    if not document.text:
        return _placeholder(document, "no text could be extracted")
    if allowance <= 0:
        return _placeholder(document, "text left out, the documents budget is used up")
    label = f"[document: {document.filename}]\n"
    shown = truncate_to_tokens(document.text, allowance)
    text_tokens = count_tokens(shown)
    if shown == document.text:
        return RenderedDocument(label + shown, count_tokens(label) + text_tokens, text_tokens)
    note = f"\n[… the rest of {document.filename} is cut to fit the context …]"
    return RenderedDocument(
        label + shown + note,
        count_tokens(label) + text_tokens + count_tokens(note),
        text_tokens,
    )


def _placeholder(document: AttachmentRef, reason: str) -> RenderedDocument:
    text = f"[document: {describe(document)}; {reason}]"
    return RenderedDocument(text, count_tokens(text), 0)


def render_documents(
    newest_first: Iterable[AttachmentRef], *, per_document: int, total: int
) -> dict[str, RenderedDocument]:
    """Each distinct document (by content hash) rendered once, the newest served first.

    The newest documents are the likeliest to be asked about, so they get the
    shared budget before older ones fall back to placeholders.
    """
    remaining = total
    rendered: dict[str, RenderedDocument] = {}
    for document in newest_first:
        if document.sha256 in rendered:
            continue
        rendering = render_document(document, min(per_document, remaining))
        remaining -= rendering.text_tokens
        rendered[document.sha256] = rendering
    return rendered
