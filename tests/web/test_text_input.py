"""Text PostgreSQL would refuse, and documents in other encodings, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.web.conftest import ClientFactory, parse_events
from tests.web.helpers import WebVisitor

BOUNDARY = "chorusboundary"
LATIN_1 = "Café au lait, crème brûlée et pâté: déjà vu à Noël."


async def test_nul_in_names_file_names_and_text_is_stored_cleanly(
    database: dict[str, Any], make_client: ClientFactory
) -> None:
    client = await make_client(**database)
    visitor = await WebVisitor.start(client, name="Mal\x00lory")
    assert (await visitor.refresh())["name"] == "Mallory"
    # Built by hand: HTTP clients percent-encode a NUL in a file name, a hostile one need not.
    body = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="text"\r\n\r\nread\x00 this\x07\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="no\x00tes.txt"\r\n'
        "Content-Type: text/plain\r\n\r\nline one\x00\nline two\r\n"
        f"--{BOUNDARY}--\r\n"
    ).encode()
    response = await post_raw(client, visitor, body)
    assert response.status_code == 200, response.text
    events = parse_events(response.text)
    assert events[-1].name == "done", events[-1]
    [message] = (await visitor.history())["messages"][:1]
    assert message["text"] == "read this" and message["sender_name"] == "Mallory"
    assert message["attachments"][0]["filename"] == "notes.txt"
    stores = client.runtime.stores  # type: ignore[attr-defined]
    [document] = stores.messages.session_documents(visitor.session_id)
    assert document.text == "line one\nline two"


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        ("Grüße aus Köln — 你好".encode("utf-16"), "Grüße aus Köln — 你好"),
        (b"\xef\xbb\xbfGr\xc3\xbc\xc3\x9fe", "Grüße"),
        (LATIN_1.encode("latin-1"), LATIN_1),
    ],
    ids=["utf-16", "utf-8-bom", "latin-1"],
)
async def test_text_documents_are_decoded_by_bom_and_detected_charset(
    database: dict[str, Any], make_client: ClientFactory, encoded: bytes, expected: str
) -> None:
    client = await make_client(**database)
    visitor = await WebVisitor.start(client)
    events = await visitor.say("summarise", files=[("files", ("letter.txt", encoded, "text/plain"))])
    assert events[-1].name == "done", events[-1]
    stores = client.runtime.stores  # type: ignore[attr-defined]
    [document] = stores.messages.session_documents(visitor.session_id)
    assert document.text == expected


async def test_invalid_utf8_in_a_form_field_gets_a_clear_error_and_stores_nothing(
    client: httpx.AsyncClient,
) -> None:
    visitor = await WebVisitor.start(client)
    body = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="text"\r\n\r\n'.encode()
        + b"caf\xe9 \xff\xfe"
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    multipart = await post_raw(client, visitor, body)
    assert multipart.status_code == 422 and "not valid UTF-8" in multipart.json()["detail"]
    urlencoded = await client.post(
        f"/api/sessions/{visitor.session_id}/messages",
        headers={**visitor.headers, "Content-Type": "application/x-www-form-urlencoded"},
        content=b"text=caf%E9",
    )
    assert urlencoded.status_code == 422 and "not valid UTF-8" in urlencoded.json()["detail"]
    assert (await visitor.history())["messages"] == []


async def post_raw(client: httpx.AsyncClient, visitor: WebVisitor, body: bytes) -> httpx.Response:
    return await client.post(
        f"/api/sessions/{visitor.session_id}/messages",
        headers={**visitor.headers, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        content=body,
    )
