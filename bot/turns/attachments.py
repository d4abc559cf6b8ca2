"""Attachments: validate, store by content hash, extract document text, measure audio.

Files live under `<data_dir>/attachments/<hash[:2]>/<hash>`; images also get a
downscaled copy for vision models, made once at ingestion so later turns only
read it. Voice notes and audio files are decoded once (`bot.speech.audio`) to check
them and measure their length; hearing what they say is `bot.speech.hearing`'s.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import hashlib
import io
import logging
import mimetypes
import re
import threading
from pathlib import Path, PurePath

from charset_normalizer import from_bytes
from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PdfReadError

from bot.config import Settings
from bot.errors import (
    AttachmentTooLarge,
    AudioTooLong,
    CorruptDocument,
    ImageTooLarge,
    UnsupportedAttachment,
)
from bot.speech.audio import decode_bytes
from bot.storage.message_append import NewAttachment
from bot.turns.inbound import InboundAttachment
from transcript.audio import format_duration

log = logging.getLogger(__name__)

PDF_TYPE = "application/pdf"
# What people may send, by the names they know the formats by: the checks and the
# refusal text both come from these two tables.
IMAGE_FORMATS = {"PNG": {"image/png"}, "JPEG": {"image/jpeg"}, "GIF": {"image/gif"}, "WebP": {"image/webp"}}
DOCUMENT_FORMATS = {
    "PDF": {PDF_TYPE},
    "TXT": {"text/plain"},
    "Markdown": {"text/markdown", "text/x-markdown"},
    "CSV": {"text/csv"},
    "JSON": {"application/json"},
}
AUDIO_FORMATS = {
    "OGG/Opus": {"audio/ogg", "audio/opus"},
    "MP3": {"audio/mpeg", "audio/mp3"},
    "M4A": {"audio/mp4", "audio/x-m4a", "audio/m4a", "audio/aac"},
    "WAV": {"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"},
    "WebM": {"audio/webm"},
    "FLAC": {"audio/flac", "audio/x-flac"},
}
IMAGE_TYPES = set().union(*IMAGE_FORMATS.values())
TEXT_TYPES = set().union(*DOCUMENT_FORMATS.values()) - {PDF_TYPE}
AUDIO_TYPES = set().union(*AUDIO_FORMATS.values())
# A round video message (Telegram) is taken for its sound, as a voice note; other videos are not.
VIDEO_MESSAGE_TYPES = {"video/mp4", "video/webm"}
ACCEPTED_FORMATS = (
    f"an image ({', '.join(IMAGE_FORMATS)}), a document ({', '.join(DOCUMENT_FORMATS)}) "
    f"or a voice note or audio file ({', '.join(AUDIO_FORMATS)})"
)
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
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".opus": "audio/ogg",
    ".mp3": "audio/mpeg",
    ".m4a": "audio/mp4",
    ".wav": "audio/wav",
    ".weba": "audio/webm",
    ".flac": "audio/flac",
}
MODEL_IMAGE_SUFFIX = ".model.jpg"
# A decoded image holds up to 4 bytes a pixel; decoding one at a time per process
# keeps a burst of uploads from multiplying that peak.
IMAGE_WORK = threading.BoundedSemaphore(1)
# Short Latin-1 texts are ambiguous to charset detection (French comes out as Baltic
# or Central European code pages): a file whose every byte reads as printable ASCII
# or a common Western European letter or mark in Windows-1252 is taken as that.
NOT_WESTERN = re.compile(
    "[^\t\n\r\x20-\x7eàáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝŒ‘’“”„–—…«»¿¡°€·§©®\xa0]"
)
# Longest first: the UTF-32 LE mark starts with the UTF-16 LE one.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class AttachmentStore:
    """Turns inbound attachments into stored files plus database records."""

    def __init__(
        self,
        data_dir: Path,
        max_bytes: int,
        image_max_side: int,
        image_max_pixels: int,
        *,
        audio_max_bytes: int | None = None,
        audio_max_seconds: float = 600.0,
    ) -> None:
        self.root = data_dir / "attachments"
        self.max_bytes = max_bytes
        self.image_max_side = image_max_side
        self.image_max_pixels = image_max_pixels
        self.audio_max_bytes = audio_max_bytes if audio_max_bytes is not None else max_bytes
        self.audio_max_seconds = audio_max_seconds

    @classmethod
    def from_settings(cls, settings: Settings) -> AttachmentStore:
        limits = settings.limits
        return cls(
            settings.data_dir,
            limits.max_upload_bytes,
            limits.image_max_side,
            limits.image_max_pixels,
            audio_max_bytes=limits.audio_max_bytes,
            audio_max_seconds=limits.audio_max_seconds,
        )

    @property
    def largest_file(self) -> int:
        """The most bytes any one attachment may have, whatever its kind."""
        return max(self.max_bytes, self.audio_max_bytes)

    def limit_for(self, mime_type: str) -> int:
        return self.audio_max_bytes if mime_type in AUDIO_TYPES | VIDEO_MESSAGE_TYPES else self.max_bytes

    def check_declared(self, attachment: InboundAttachment) -> str:
        """Reject what we can before downloading anything; returns the mime type."""
        mime_type = normalise_mime(attachment.filename, attachment.mime_type)
        accepted = IMAGE_TYPES | TEXT_TYPES | AUDIO_TYPES | {PDF_TYPE}
        if attachment.kind == "voice":
            accepted |= VIDEO_MESSAGE_TYPES
        if mime_type not in accepted:
            raise UnsupportedAttachment(
                attachment.filename, attachment.mime_type or "unknown type", ACCEPTED_FORMATS
            )
        limit = self.limit_for(mime_type)
        if attachment.size is not None and attachment.size > limit:
            raise AttachmentTooLarge(attachment.filename, attachment.size, limit)
        declared = attachment.duration_seconds
        if declared is not None and declared > self.audio_max_seconds:
            raise AudioTooLong(
                attachment.filename, format_duration(self.audio_max_seconds), format_duration(declared)
            )
        return mime_type

    async def ingest(self, attachment: InboundAttachment) -> NewAttachment:
        self.check_declared(attachment)
        data = await attachment.fetch()
        return await asyncio.to_thread(self.store_checked, attachment, data)

    def store_checked(self, attachment: InboundAttachment, data: bytes) -> NewAttachment:
        """`store_bytes` for the fetched bytes of `attachment`, after every check of its kind."""
        mime_type = self.check_declared(attachment)
        limit = self.limit_for(mime_type)
        if len(data) > limit:
            raise AttachmentTooLarge(attachment.filename, len(data), limit)
        voice = attachment.kind == "voice"
        return self.store_bytes(attachment.filename, mime_type, data, voice=voice)

    def store_bytes(
        self, filename: str, mime_type: str, data: bytes, *, voice: bool = False
    ) -> NewAttachment:
        """Write the file (once per content hash) and describe it for the database.

        `voice`: the audio is a recording sent as a message (a voice note), not an audio file.
        """
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / digest[:2] / digest
        path.parent.mkdir(parents=True, exist_ok=True)
        text: str | None = None
        duration: float | None = None
        if mime_type in IMAGE_TYPES:
            kind = "image"
            self._write_model_image(filename, data, path.with_name(digest + MODEL_IMAGE_SUFFIX))
        elif mime_type in AUDIO_TYPES | VIDEO_MESSAGE_TYPES:
            kind = "voice" if voice else "audio"
            # Decoded whole before anything is written: a file that is not audio is refused.
            duration = round(decode_bytes(data, filename, self.audio_max_seconds).seconds, 3)
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
            duration_seconds=duration,
        )

    def check_image(self, filename: str, data: bytes) -> tuple[int, int]:
        """The image's size from its header alone; refuses what is too large to decode."""
        try:
            with Image.open(io.BytesIO(data)) as image:
                size = image.size
        except Image.DecompressionBombError as error:
            # Pillow's own guard fired while reading the header: far over any sane limit.
            raise ImageTooLarge(filename, self.image_max_pixels, None) from error
        except (UnidentifiedImageError, OSError, ValueError) as error:
            raise UnsupportedAttachment(
                filename, "an image that could not be decoded", ACCEPTED_FORMATS
            ) from error
        if size[0] * size[1] > self.image_max_pixels:
            raise ImageTooLarge(filename, self.image_max_pixels, size)
        return size

    def _write_model_image(self, filename: str, data: bytes, target: Path) -> None:
        self.check_image(filename, data)
        box = (self.image_max_side, self.image_max_side)
        with IMAGE_WORK:
            try:
                with Image.open(io.BytesIO(data)) as image:
                    # JPEG decodes straight at 1/2, 1/4 or 1/8 scale; thumbnail then reduces by
                    # whole factors before resampling, so no full-size copy is made twice.
                    image.draft("RGB", box)
                    workable = image if image.mode in ("RGB", "RGBA", "L") else image.convert("RGBA")
                    workable.thumbnail(box, reducing_gap=2.0)
                    small = workable.convert("RGB")
            except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as error:
                raise UnsupportedAttachment(
                    filename, "an image that could not be decoded", ACCEPTED_FORMATS
                ) from error
        small.save(target, format="JPEG", quality=85)

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
    if declared in IMAGE_TYPES | TEXT_TYPES | AUDIO_TYPES | VIDEO_MESSAGE_TYPES | {PDF_TYPE}:
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
    return decode_text(data)


def decode_text(data: bytes) -> str:
    """A text file as readable text: by its byte-order mark, as UTF-8, or by the detected charset."""
    for mark, encoding in BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return data[len(mark) :].decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    western = data.decode("cp1252", errors="replace")
    if NOT_WESTERN.search(western) is None:
        return western
    best = from_bytes(data).best()
    return str(best) if best is not None else data.decode("utf-8", errors="replace")


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
