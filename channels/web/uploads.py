"""Multipart uploads → `InboundAttachment`s, within the size, count and type limits."""

from __future__ import annotations

from fastapi import HTTPException, Request, status
from starlette.datastructures import UploadFile

from bot.errors import AttachmentTooLarge, ImageTooLarge, UnsupportedAttachment
from bot.turns.attachments import (
    AUDIO_TYPES,
    IMAGE_TYPES,
    PDF_TYPE,
    TEXT_TYPES,
    AttachmentStore,
    normalise_mime,
)
from bot.turns.inbound import InboundAttachment, kind_of_file

MAX_FILES = 5
# Room for the text field and multipart framing on top of the files themselves.
FORM_OVERHEAD_BYTES = 256 * 1024
ACCEPTED_TYPES = sorted(IMAGE_TYPES | TEXT_TYPES | AUDIO_TYPES | {PDF_TYPE})


def check_request_size(request: Request, max_file_bytes: int) -> None:
    """Refuse an oversized body before reading it: the browser always declares its length."""
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit():
        raise HTTPException(status.HTTP_411_LENGTH_REQUIRED, "Send the message with a Content-Length header.")
    limit = MAX_FILES * max_file_bytes + FORM_OVERHEAD_BYTES
    if int(declared) > limit:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"The upload is too large: at most {MAX_FILES} files "
            f"of {max_file_bytes / 1_048_576:.1f} MB each.",
        )


async def read_uploads(
    files: list[UploadFile], store: AttachmentStore, *, recorded: bool = False
) -> tuple[InboundAttachment, ...]:
    """Read and check every file now, so a bad one fails the request with a clear status.

    The form parser already refused more than `MAX_FILES`; an image is checked from its
    header here (the engine checks again on every lane) so a bomb is a 413, not a stream.
    `recorded`: the files were recorded in the widget (voice messages, not audio files).
    """
    attachments = []
    for upload in files:
        filename = upload.filename or "attachment"
        data = await upload.read(store.largest_file + 1)
        size = upload.size if upload.size is not None else len(data)
        attachment = in_memory_attachment(filename, upload.content_type, data, size, recorded)
        try:
            store.check_declared(attachment)
            if attachment.kind == "image":
                store.check_image(filename, data)
        except UnsupportedAttachment as error:
            raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, str(error)) from error
        except (AttachmentTooLarge, ImageTooLarge) as error:
            raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, str(error)) from error
        attachments.append(attachment)
    return tuple(attachments)


def in_memory_attachment(
    filename: str, declared_type: str | None, data: bytes, size: int, recorded: bool = False
) -> InboundAttachment:
    mime_type = normalise_mime(filename, declared_type)

    async def fetch() -> bytes:
        return data

    return InboundAttachment(
        kind="voice" if recorded else kind_of_file(mime_type),
        filename=filename,
        mime_type=mime_type,
        size=size,
        fetch=fetch,
    )
