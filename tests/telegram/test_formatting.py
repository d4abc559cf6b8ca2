"""Markdown → Telegram text and entities, checked against the stand-in's copy of Telegram's rules."""

from __future__ import annotations

from channels.telegram.formatting import render, split
from tests.telegram.telegram_text import formatted_text, utf16_len


def as_sent(part_text: str, entities: list[dict[str, object]]) -> list[str]:
    """Telegram's view of one part; raises if Telegram would refuse it."""
    return [
        f"{e['type']}:{e['offset']}+{e['length']}"
        for e in formatted_text({"text": part_text, "entities": entities}).entities
    ]


def test_text_that_looks_like_html_is_kept() -> None:
    for text in [
        "List<String> and a < b",
        "/persona <id> — switch",
        "<div>hi</div> x",
        "x\n\n<details>\nsecret\n</details>",
    ]:
        assert render(text).text.replace("\n\n", "\n") == text.replace("\n\n", "\n")


def test_header_and_body_entities_are_in_utf16_units() -> None:
    rendered = render("🚀 **go** `my_var`", speaker="Zoë 🚀")
    assert rendered.text == "Zoë 🚀\n🚀 go my_var"
    spans = {(entity.type, entity.offset, entity.length) for entity in rendered.entities}
    assert spans == {("bold", 0, 6), ("bold", 10, 2), ("code", 13, 6)}
    as_sent(rendered.text, [entity.model_dump(exclude_none=True) for entity in rendered.entities])


def test_every_part_of_a_long_reply_is_valid_on_its_own() -> None:
    body = "\n".join(f"**{index}** 🚀 `code_{index}` and _more_ text here" for index in range(400))
    block = "```python\n" + "\n".join(f"print('😀 {index}')" for index in range(300)) + "\n```"
    parts = split(render(body + "\n\n" + block, speaker="Ada"))

    assert len(parts) >= 4
    for part in parts:
        assert utf16_len(part.text) <= 4096
        as_sent(part.text, [entity.model_dump(exclude_none=True) for entity in part.entities])
    assert parts[0].text.startswith("Ada\n") and not parts[1].text.startswith("Ada\n")
    languages = {entity.language for part in parts for entity in part.entities if entity.type == "pre"}
    assert languages == {"python"}
