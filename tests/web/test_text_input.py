"""Text PostgreSQL would refuse, and documents in other encodings, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.web.conftest import ClientFactory, parse_events
from tests.web.helpers import WebVisitor

ADMIN_URL = os.environ.get("CHORUS_TEST_POSTGRES_URL")
BOUNDARY = "chorusboundary"
LATIN_1 = "Café au lait, crème brûlée et pâté: déjà vu à Noël."


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Settings overrides for a fresh database on each backend."""
    if request.param == "sqlite":
        yield {}
        return
    if not ADMIN_URL:
        pytest.skip("CHORUS_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)")
    name = f"chorus_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        make_url(ADMIN_URL).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield {"database_url": make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)}
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


async def test_nul_in_names_file_names_and_text_is_stored_cleanly(
    backend: dict[str, Any], make_client: ClientFactory
) -> None:
    client = await make_client(**backend)
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
    store = client.runtime.store  # type: ignore[attr-defined]
    [document] = store.session_documents(visitor.session_id)
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
    backend: dict[str, Any], make_client: ClientFactory, encoded: bytes, expected: str
) -> None:
    client = await make_client(**backend)
    visitor = await WebVisitor.start(client)
    events = await visitor.say("summarise", files=[("files", ("letter.txt", encoded, "text/plain"))])
    assert events[-1].name == "done", events[-1]
    store = client.runtime.store  # type: ignore[attr-defined]
    [document] = store.session_documents(visitor.session_id)
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
