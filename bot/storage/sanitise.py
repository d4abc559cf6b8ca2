"""What text the database accepts: the one cleaning every stored text field goes through.

PostgreSQL refuses NUL in text columns, and lone surrogates (invalid UTF-8 that a
platform decoded leniently) cannot be encoded at all; SQLite would keep both and
hand them to the model. The store cleans names, file names, message and document
text here, so every lane and every backend store the same thing.
"""

from __future__ import annotations

import re

# C0 controls except tab, newline and carriage return; DEL and the C1 block stay (printable-safe).
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` minus what no database or model accepts.

    Lone surrogates become U+FFFD (valid pairs were already combined by Python);
    NUL and other control characters are dropped.
    """
    if _SURROGATES.search(text) is not None:
        # UTF-16 round trip: a surrogate pair left split survives, lone ones become U+FFFD.
        text = text.encode("utf-16", errors="surrogatepass").decode("utf-16", errors="replace")
    return _CONTROL_CHARACTERS.sub("", text)


def clean_optional(text: str | None) -> str | None:
    return None if text is None else clean_text(text)
