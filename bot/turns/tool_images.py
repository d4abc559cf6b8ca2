"""A tool's images stored like a person's, by reference; one that cannot be stored becomes a placeholder.

What a tool returns is input like what a person sends: an image in a format Chorus
does not read, larger than `limits.max_upload_bytes`, whose bytes are not what its
type says, or that does not decode is left out of the stored result, and a short
placeholder in the result's text tells the model why. The turn goes on; the log gets
a warning, never a traceback. A stored image reaches a vision model as an image part
and any other as a placeholder (`transcript.build`), the same on every lane.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from bot.errors import AttachmentError, ImageTooLarge, ToolError
from bot.storage.message_append import NewAttachment
from bot.tools.base import ToolImage
from bot.turns.attachments import IMAGE_FORMATS, IMAGE_TYPES, AttachmentStore
from transcript.attachments import format_size

log = logging.getLogger(__name__)

NOT_AN_IMAGE = "its bytes are not an image Chorus can decode"


class Unreadable(ToolError):
    """Why a tool's image is left out, in words for the model."""


@dataclass(frozen=True)
class ToolImages:
    """The images of one result that were stored, and a placeholder for each that was not."""

    attachments: tuple[NewAttachment, ...]
    placeholders: tuple[str, ...]

    def text_with_placeholders(self, text: str) -> str:
        """The result's text, with the placeholders after it."""
        return "\n".join(part for part in (text, *self.placeholders) if part)


def store_tool_images(store: AttachmentStore, tool_name: str, images: Sequence[ToolImage]) -> ToolImages:
    """Each image stored (as `<tool>-<n>`), or a placeholder saying why it could not be."""
    attachments: list[NewAttachment] = []
    placeholders: list[str] = []
    for number, image in enumerate(images, 1):
        try:
            attachments.append(_stored(store, f"{tool_name}-{number}", image))
        except Unreadable as why:
            log.warning("tool %s: image %d (%s) left out: %s", tool_name, number, image.mime_type, why)
            shown = f"{image.mime_type or 'no type'}, {format_size(len(image.data))}"
            placeholders.append(f"[an image that could not be read ({shown}): {why}]")
    return ToolImages(tuple(attachments), tuple(placeholders))


def _stored(store: AttachmentStore, filename: str, image: ToolImage) -> NewAttachment:
    declared = image.mime_type.split(";")[0].strip().lower()
    if declared not in IMAGE_TYPES:
        raise Unreadable(f"it is not in a format Chorus reads ({', '.join(IMAGE_FORMATS)})")
    if len(image.data) > store.max_bytes:
        raise Unreadable(f"it is larger than the {format_size(store.max_bytes)} an image may have")
    found = _format_of(image.data, store.image_max_pixels)
    if found is None:
        raise Unreadable(NOT_AN_IMAGE)
    if found != declared:
        raise Unreadable(f"it says it is {declared}, but its bytes are {found}")
    try:
        return store.store_bytes(filename, declared, image.data)
    except ImageTooLarge:
        raise Unreadable(_too_many_pixels(store.image_max_pixels)) from None
    except AttachmentError:
        raise Unreadable(NOT_AN_IMAGE) from None


def _format_of(data: bytes, max_pixels: int) -> str | None:
    """The type the bytes' own header says (`image/png`), or None when Pillow does not know them."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return Image.MIME.get(image.format or "")
    except Image.DecompressionBombError:
        raise Unreadable(_too_many_pixels(max_pixels)) from None
    except (UnidentifiedImageError, OSError, ValueError):
        return None


def _too_many_pixels(max_pixels: int) -> str:
    return f"it has more than the {max_pixels:,} pixels an image may have"
