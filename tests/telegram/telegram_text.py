"""Telegram's rules for a message's text, as the Bot API applies them to what a bot sends.

Written from the Bot API documentation (formatting options, MessageEntity) and the
behaviour of Telegram's servers:

- `entities` are offsets and lengths in UTF-16 code units. A negative offset or length
  is refused, an empty entity is dropped, an entity that starts or ends past the end
  of the text or inside a surrogate pair is refused, an unknown type is refused, and
  `text_link` needs a `url`, `text_mention` a `user`, `custom_emoji` an id.
- legacy `parse_mode=Markdown`: `*bold*`, `_italic_`, `` `code` ``, ```` ```pre``` ````
  (an optional language right after the opening fence), `[text](url)`. Entities do
  not nest; a backslash escapes `_ * ` [` outside of them; an entity left open is
  "can't parse entities: Can't find end of the entity starting at byte offset N".
  So `my_helper_function` loses its underscores and turns `helper` italic.
- The text is trimmed of leading and trailing spaces and newlines; what is left must
  not be empty and must be at most 4096 characters.
- Telegram finds `/commands`, `@usernames` and URLs in the text itself (outside code,
  pre and links) and makes them tappable entities.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MESSAGE_LIMIT = 4096
# What Telegram turns into tappable entities by itself.
_FOUND = (
    ("bot_command", re.compile(r"(?<![\w/<>])/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?(?![\w/<>])")),
    ("mention", re.compile(r"(?<!\w)@[A-Za-z0-9_]{2,32}(?!\w)")),
    ("url", re.compile(r"https?://[^\s<>\"]+[^\s<>\".,;:!?)\]]")),
)
_OPAQUE = frozenset({"code", "pre", "text_link", "url", "mention", "bot_command", "email"})
ENTITY_TYPES = frozenset(
    {
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "url",
        "email",
        "phone_number",
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "blockquote",
        "expandable_blockquote",
        "code",
        "pre",
        "text_link",
        "text_mention",
        "custom_emoji",
        "date_time",
    }
)


class TextRejected(Exception):
    """The Bot API answers 400 with `description`."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


@dataclass
class FormattedText:
    """A message's text as the recipient sees it, with its entities (UTF-16 units)."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)

    def spans(self, kind: str) -> list[str]:
        """The pieces of text covered by entities of `kind`, in order."""
        return [utf16_slice(self.text, e["offset"], e["length"]) for e in self.entities if e["type"] == kind]


def formatted_text(params: dict[str, Any], *, allow_empty: bool = False) -> FormattedText:
    """The text a sendMessage/editMessageText/sendMessageDraft call produces, or TextRejected."""
    text = str(params.get("text", ""))
    parse_mode = params.get("parse_mode")
    entities = params.get("entities")
    if parse_mode and entities:
        entities = None  # Telegram ignores entities when parse_mode is given
    if parse_mode == "Markdown":
        result = parse_legacy_markdown(text)
    elif parse_mode:
        raise NotImplementedError(f"the stand-in does not implement parse_mode={parse_mode}")
    else:
        result = FormattedText(text, _checked_entities(text, entities or []))
    result = _with_found_entities(_trimmed(result))
    if not result.text and not allow_empty:
        raise TextRejected("Bad Request: message text is empty")
    if len(result.text) > MESSAGE_LIMIT:
        raise TextRejected("Bad Request: message is too long")
    return result


def parse_legacy_markdown(text: str) -> FormattedText:
    """Telegram's legacy Markdown: the visible text and the entities it yields."""
    out: list[str] = []
    entities: list[dict[str, Any]] = []
    data = text.encode()
    i = 0
    size = len(data)

    def at(index: int) -> int:
        return data[index] if index < size else 0

    while i < size:
        c = data[i]
        if c == ord("\\") and at(i + 1) in b"_*`[":
            out.append(chr(at(i + 1)))
            i += 2
            continue
        if c not in b"_*`[":
            end = i + 1
            while end < size and data[end] not in b"\\_*`[":
                end += 1
            out.append(data[i:end].decode())
            i = end
            continue
        begin = i
        end_char = ord("]") if c == ord("[") else c
        i += 1
        is_pre = False
        language = ""
        if c == ord("`") and at(i) == ord("`") and at(i + 1) == ord("`"):
            i += 2
            is_pre = True
            language_end = i
            while language_end < size and data[language_end] not in b" \t\r\n`":
                language_end += 1
            if i != language_end and language_end < size and data[language_end] != ord("`"):
                language = data[i:language_end].decode()
                i = language_end
            if at(i) in b"\r\n" and at(i) != 0:
                i += 2 if at(i + 1) in b"\r\n" and at(i + 1) != 0 and at(i) != at(i + 1) else 1
        start = i
        while i < size and (
            data[i] != end_char or (is_pre and not (at(i + 1) == ord("`") and at(i + 2) == ord("`")))
        ):
            i += 1
        if i >= size:
            raise TextRejected(
                "Bad Request: can't parse entities: "
                f"Can't find end of the entity starting at byte offset {begin}"
            )
        inner = data[start:i].decode()
        offset = utf16_len("".join(out))
        length = utf16_len(inner)
        out.append(inner)
        if length:
            entity: dict[str, Any] | None
            if c == ord("_"):
                entity = {"type": "italic"}
            elif c == ord("*"):
                entity = {"type": "bold"}
            elif c == ord("["):
                url = inner
                if at(i + 1) == ord("("):
                    close = data.find(b")", i + 2)
                    close = size if close == -1 else close
                    url = data[i + 2 : close].decode()
                    i = close
                entity = {"type": "text_link", "url": url} if _is_link(url) else None
            elif is_pre:
                entity = {"type": "pre", **({"language": language} if language else {})}
            else:
                entity = {"type": "code"}
            if entity is not None:
                entities.append({**entity, "offset": offset, "length": length})
        if is_pre:
            i += 2
        i += 1
    return FormattedText("".join(out), entities)


def _is_link(url: str) -> bool:
    stripped = url.strip()
    return bool(stripped) and " " not in stripped and ("." in stripped or stripped.startswith("tg://"))


def _checked_entities(text: str, entities: list[Any]) -> list[dict[str, Any]]:
    units = utf16_units(text)
    checked: list[dict[str, Any]] = []
    for entity in entities:
        if not isinstance(entity, dict) or not isinstance(entity.get("type"), str):
            raise TextRejected("Bad Request: can't parse entities: entity must be an object with a type")
        kind = entity["type"]
        if kind not in ENTITY_TYPES:
            raise TextRejected(f'Bad Request: can\'t parse entities: Unsupported entity type "{kind}"')
        offset, length = entity.get("offset"), entity.get("length")
        if not isinstance(offset, int) or offset < 0:
            raise TextRejected(
                f"Bad Request: can't parse entities: Receive an entity with incorrect offset {offset}"
            )
        if not isinstance(length, int) or length < 0:
            raise TextRejected(
                f"Bad Request: can't parse entities: Receive an entity with incorrect length {length}"
            )
        if kind == "text_link" and not entity.get("url"):
            raise TextRejected("Bad Request: can't parse entities: text_link entity needs a url")
        if kind == "text_mention" and not entity.get("user"):
            raise TextRejected("Bad Request: can't parse entities: text_mention entity needs a user")
        if kind == "custom_emoji" and not entity.get("custom_emoji_id"):
            raise TextRejected("Bad Request: can't parse entities: Invalid custom emoji identifier specified")
        if length == 0:
            continue  # empty entities are dropped
        end = offset + length
        if offset >= len(units):
            raise TextRejected(
                f"Bad Request: Entity begins after the end of the text at UTF-16 offset {offset}"
            )
        if end > len(units):
            raise TextRejected(
                f"Bad Request: Entity beginning at UTF-16 offset {offset} ends after the end of the text "
                f"at UTF-16 offset {end}"
            )
        if _is_low_surrogate(units[offset]):
            raise TextRejected("Bad Request: Entity begins in a middle of a UTF-16 symbol")
        if end < len(units) and _is_low_surrogate(units[end]):
            raise TextRejected(
                f"Bad Request: Entity beginning at UTF-16 offset {offset} ends in a middle of a UTF-16 symbol"
            )
        checked.append(dict(entity))
    return checked


def _trimmed(formatted: FormattedText) -> FormattedText:
    """Leading and trailing spaces and newlines go; entities are clipped to what is left."""
    text = formatted.text
    lead = utf16_len(text) - utf16_len(text.lstrip(" \n"))
    body = text.strip(" \n")
    size = utf16_len(body)
    entities = []
    for entity in formatted.entities:
        start = max(entity["offset"] - lead, 0)
        end = min(entity["offset"] + entity["length"] - lead, size)
        if end > start:
            entities.append({**entity, "offset": start, "length": end - start})
    return FormattedText(body, entities)


def _with_found_entities(formatted: FormattedText) -> FormattedText:
    taken = [
        (entity["offset"], entity["offset"] + entity["length"])
        for entity in formatted.entities
        if entity["type"] in _OPAQUE
    ]
    found: list[dict[str, Any]] = []
    for kind, pattern in _FOUND:
        for match in pattern.finditer(formatted.text):
            start = utf16_len(formatted.text[: match.start()])
            end = start + utf16_len(match.group())
            if any(start < other_end and other_start < end for other_start, other_end in taken):
                continue
            taken.append((start, end))
            found.append({"type": kind, "offset": start, "length": end - start})
    entities = sorted(formatted.entities + found, key=lambda entity: (entity["offset"], -entity["length"]))
    return FormattedText(formatted.text, entities)


def utf16_units(text: str) -> list[int]:
    encoded = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(encoded[i : i + 2], "little") for i in range(0, len(encoded), 2)]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_slice(text: str, offset: int, length: int) -> str:
    encoded = text.encode("utf-16-le", "surrogatepass")
    return encoded[offset * 2 : (offset + length) * 2].decode("utf-16-le", "surrogatepass")


def _is_low_surrogate(unit: int) -> bool:
    return 0xDC00 <= unit <= 0xDFFF
