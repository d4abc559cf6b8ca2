"""The model's Markdown as Telegram shows it: plain text plus MessageEntity objects.

Telegram's legacy Markdown parse mode mangles ordinary text (`my_helper_function`
loses its underscores, `**bold**` is not bold), so replies are converted here —
by telegramify-markdown, a CommonMark parser — and sent with `entities` and no
`parse_mode`. Offsets are UTF-16 code units, as Telegram counts them. Drafts and
final messages go through the same `render`, so a reply looks the same while it
streams and when it is done.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pyromark
import telegramify_markdown
from aiogram.types import MessageEntity
from telegramify_markdown import RenderConfig, split_entities, utf16_len
from telegramify_markdown.converter import STANDARD_OPTIONS

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096

_CONFIG = RenderConfig.isolated()
# Headings stay bold text, without the emoji the converter puts in front by default.
for _level in range(1, 7):
    setattr(_CONFIG.markdown_symbol, f"heading_level_{_level}", "")


@dataclass(frozen=True)
class TelegramText:
    """What one Telegram message shows: the text and its entities."""

    text: str
    entities: list[MessageEntity] = field(default_factory=list)

    def with_suffix(self, suffix: str) -> TelegramText:
        return TelegramText(self.text + suffix, self.entities)


def render(markdown: str, *, speaker: str | None = None) -> TelegramText:
    """`markdown` as Telegram text; `speaker` becomes a bold first line naming who speaks."""
    try:
        text, converted = telegramify_markdown.convert(
            _escape_html(markdown), latex_escape=False, config=_CONFIG
        )
        entities = [MessageEntity(**entity.to_dict()) for entity in converted]
    except Exception:
        # A converter bug must not cost the reply: show the text as the model wrote it.
        log.exception("could not convert a reply's Markdown; sending it as plain text")
        text, entities = markdown, []
    if not speaker:
        return TelegramText(text, entities)
    header = f"{speaker}\n"
    shift = utf16_len(header)
    shifted = [entity.model_copy(update={"offset": entity.offset + shift}) for entity in entities]
    bold = MessageEntity(type="bold", offset=0, length=utf16_len(speaker))
    return TelegramText(header + text, [bold, *shifted])


def _escape_html(markdown: str) -> str:
    """Raw HTML is text in a chat (`List<String>`, `/persona <id>`), never markup to drop.

    CommonMark reads `<tag>` as HTML, which the converter leaves out; each `<` that
    starts HTML is escaped and the text parsed again until none is left.
    """
    while True:
        source = markdown.encode()
        offsets = sorted(
            {
                start + index
                for payload, where in pyromark.events_with_range(markdown, options=STANDARD_OPTIONS)
                if isinstance(payload, dict) and ("Html" in payload or "InlineHtml" in payload)
                for start in [where["start"]]
                for index, byte in enumerate(source[start : where["end"]])
                if byte == ord("<")
            }
        )
        if not offsets:
            return markdown
        for offset in reversed(offsets):
            source = source[:offset] + b"\\" + source[offset:]
        markdown = source.decode()


def folded_reasoning(reasoning: str, limit: int = MESSAGE_LIMIT) -> TelegramText:
    """The model's thinking as one message: a title, then an expandable blockquote (folded).

    Thinking longer than the message limit keeps its end, where the model reached its answer.
    """
    title = "💭 Thinking\n"
    room = limit - utf16_len(title) - 1
    body = reasoning.strip()
    if utf16_len(body) > room:
        body = "…" + body[-(room // 2) :]
    quote = MessageEntity(type="expandable_blockquote", offset=utf16_len(title), length=utf16_len(body))
    return TelegramText(title + body, [quote])


def plain(text: str) -> TelegramText:
    return TelegramText(text)


def split(rendered: TelegramText, limit: int = MESSAGE_LIMIT) -> list[TelegramText]:
    """Parts of at most `limit` UTF-16 units, cut at line breaks where possible.

    An entity that crosses a cut is clipped into both parts, so every part is
    valid on its own and a code block stays monospace on both sides.
    """
    converted = [
        telegramify_markdown.MessageEntity(
            type=entity.type,
            offset=entity.offset,
            length=entity.length,
            url=entity.url,
            language=entity.language,
        )
        for entity in rendered.entities
    ]
    parts = split_entities(rendered.text, converted, limit)
    return [
        TelegramText(text, [MessageEntity(**entity.to_dict()) for entity in entities])
        for text, entities in parts
    ] or [rendered]


def length(rendered: TelegramText) -> int:
    return int(utf16_len(rendered.text))
