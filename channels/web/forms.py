"""Reading a message form strictly, so bad input gets its own clear status.

Starlette decodes a text field that is not valid UTF-8 as Latin-1 without a word
and answers too many files with a bare 400; a message must not be stored as
mojibake, and too many files is a size problem (413).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import parse_qsl

from fastapi import HTTPException, Request, status
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from bot.errors import InputError

CLIENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
FIELDS = ("text", "client_id", "files", "voice")
INVALID_TEXT = "The message is not valid UTF-8 text; send it as UTF-8."


class InvalidFieldText(MultiPartException, InputError):
    """Raised inside Starlette's parser, so it is also the parser's own error type."""

    def __init__(self) -> None:
        super().__init__(INVALID_TEXT)


class StrictMultiPartParser(MultiPartParser):
    """Starlette's parser, refusing text fields that do not decode in the declared charset."""

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:
            try:
                bytes(part.data).decode(self._charset)
            except UnicodeDecodeError as error:
                raise InvalidFieldText() from error
        super().on_part_end()


@asynccontextmanager
async def message_form(request: Request, max_files: int, max_fields: int) -> AsyncIterator[FormData]:
    """The parsed form (multipart, or URL-encoded without files); its files close afterwards."""
    content_type, _ = parse_options_header(request.headers.get("content-type"))
    if content_type == b"multipart/form-data":
        parser = StrictMultiPartParser(
            request.headers, request.stream(), max_files=max_files, max_fields=max_fields
        )
        try:
            form = await parser.parse()
        except InvalidFieldText as error:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, INVALID_TEXT) from error
        except MultiPartException as error:
            if parser._current_files > max_files:
                raise HTTPException(
                    status.HTTP_413_CONTENT_TOO_LARGE, f"Attach at most {max_files} files to one message."
                ) from error
            raise HTTPException(status.HTTP_400_BAD_REQUEST, error.message) from error
    elif content_type == b"application/x-www-form-urlencoded":
        form = FormData(parse_urlencoded(await request.body(), max_fields))
    else:
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            "Send the message as multipart/form-data (or URL-encoded, without files).",
        )
    try:
        yield form
    finally:
        await form.close()


def parse_urlencoded(body: bytes, max_fields: int) -> list[tuple[str, str | UploadFile]]:
    try:
        pairs = parse_qsl(
            body.decode("ascii"), keep_blank_values=True, errors="strict", max_num_fields=max_fields
        )
    except UnicodeDecodeError as error:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, INVALID_TEXT) from error
    except ValueError as error:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, "The form has too many fields.") from error
    return [(name, value) for name, value in pairs]


@dataclass(frozen=True)
class MessageFields:
    text: str | None
    client_id: str | None
    files: list[UploadFile]
    # Recorded in the widget (a voice message), not picked as files.
    recordings: list[UploadFile]


def message_fields(form: FormData) -> MessageFields:
    """`text`, `client_id`, the files and the recordings of a message form; anything else is a 422."""
    unknown = sorted({name for name in form if name not in FIELDS})
    if unknown:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"Unknown form field {unknown[0]!r}; a message has only {', '.join(FIELDS)}.",
        )
    text, client_id = form.get("text"), form.get("client_id")
    files, recordings = form.getlist("files"), form.getlist("voice")
    if not isinstance(text, str | None) or not isinstance(client_id, str | None):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "`text` and `client_id` are text fields.")
    if not all(isinstance(item, UploadFile) for item in (*files, *recordings)):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "`files` and `voice` must be file uploads."
        )
    if client_id is not None and not CLIENT_ID.match(client_id):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "`client_id` must be 1–100 letters, digits, - or _."
        )
    return MessageFields(
        text,
        client_id,
        [item for item in files if isinstance(item, UploadFile)],
        [item for item in recordings if isinstance(item, UploadFile)],
    )
