"""Attachments: validate, store by content hash, extract document text.

Files live under `<data_dir>/attachments/<hash[:2]>/<hash>`; images also get a
downscaled copy for vision models, made once at ingestion so later turns only
read it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import logging
import mimetypes
from pathlib import Path, PurePath

from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PdfReadError

from bot.errors import AttachmentTooLarge, CorruptDocument, UnsupportedAttachment
from bot.storage.store import NewAttachment
from bot.turns.inbound import InboundAttachment

log = logging.getLogger(__name__)

IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown", "text/csv", "application/json"}
PDF_TYPE = "application/pdf"
# Some platforms send documents as octet-stream; the extension decides then.
EXTENSION_TYPES = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".pdf": PDF_TYPE,
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MODEL_IMAGE_SUFFIX = ".model.jpg"


class AttachmentStore:
    """Turns inbound attachments into stored files plus database records."""

    def __init__(self, data_dir: Path, max_bytes: int, image_max_side: int) -> None:
        self.root = data_dir / "attachments"
        self.max_bytes = max_bytes
        self.image_max_side = image_max_side

    def check_declared(self, attachment: InboundAttachment) -> str:
        """Reject what we can before downloading anything; returns the mime type."""
        mime_type = normalise_mime(attachment.filename, attachment.mime_type)
        if mime_type not in IMAGE_TYPES | TEXT_TYPES | {PDF_TYPE}:
            raise UnsupportedAttachment(attachment.filename, attachment.mime_type or "unknown type")
        if attachment.size is not None and attachment.size > self.max_bytes:
            raise AttachmentTooLarge(attachment.filename, attachment.size, self.max_bytes)
        return mime_type

    async def ingest(self, attachment: InboundAttachment) -> NewAttachment:
        mime_type = self.check_declared(attachment)
        data = await attachment.fetch()
        if len(data) > self.max_bytes:
            raise AttachmentTooLarge(attachment.filename, len(data), self.max_bytes)
        return await asyncio.to_thread(self.store_bytes, attachment.filename, mime_type, data)

    def store_bytes(self, filename: str, mime_type: str, data: bytes) -> NewAttachment:
        """Write the file (once per content hash) and describe it for the database."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / digest[:2] / digest
        path.parent.mkdir(parents=True, exist_ok=True)
        text: str | None = None
        if mime_type in IMAGE_TYPES:
            kind = "image"
            self._write_model_image(filename, data, path.with_name(digest + MODEL_IMAGE_SUFFIX))
        else:
            kind = "document"
            text = extract_text(filename, mime_type, data)
        if not path.exists():
            path.write_bytes(data)
        return NewAttachment(
            kind=kind,
            filename=safe_filename(filename),
            mime_type=mime_type,
            size=len(data),
            sha256=digest,
            path=str(path.relative_to(self.root.parent)),
            text=text,
        )

    def _write_model_image(self, filename: str, data: bytes, target: Path) -> None:
        try:
            with Image.open(io.BytesIO(data)) as image:
                image.load()
                converted = image.convert("RGB")
        except (UnidentifiedImageError, OSError) as error:
            raise UnsupportedAttachment(filename, "an image that could not be decoded") from error
        converted.thumbnail((self.image_max_side, self.image_max_side))
        converted.save(target, format="JPEG", quality=85)

    def image_data_url(self, sha256: str) -> str | None:
        """The downscaled image as a data: URL, or None when the file is gone."""
        path = self.root / sha256[:2] / (sha256 + MODEL_IMAGE_SUFFIX)
        try:
            encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            log.warning("model copy of image %s is missing; sending a placeholder", sha256[:12])
            return None
        return f"data:image/jpeg;base64,{encoded}"

    def path_of(self, relative: str) -> Path:
        return self.root.parent / relative


def normalise_mime(filename: str, declared: str | None) -> str:
    declared = (declared or "").split(";")[0].strip().lower()
    by_extension = EXTENSION_TYPES.get(PurePath(filename).suffix.lower())
    if declared in IMAGE_TYPES | TEXT_TYPES | {PDF_TYPE}:
        return declared
    if by_extension is not None and declared in {"", "application/octet-stream", "text/plain"}:
        return by_extension
    return declared or (mimetypes.guess_type(filename)[0] or "application/octet-stream")


def safe_filename(filename: str) -> str:
    name = PurePath(filename.replace("\\", "/")).name.strip() or "attachment"
    return name[:200]


def extract_text(filename: str, mime_type: str, data: bytes) -> str:
    if mime_type == PDF_TYPE:
        return _pdf_text(filename, data)
    return data.decode("utf-8", errors="replace")


def _pdf_text(filename: str, data: bytes) -> str:
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, OSError) as error:
        raise CorruptDocument(filename) from error
    except Exception as error:  # pypdf raises many internal types on damaged files
        log.info("pypdf could not read %s: %s", filename, type(error).__name__)
        raise CorruptDocument(filename) from error
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not pages:
        raise CorruptDocument(filename)
    return text
