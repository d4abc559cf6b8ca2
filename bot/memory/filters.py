"""Hard rules applied to transcript text before anything is distilled.

Code fences, tool output and logs are noise to a classifier: a stack trace full
of "must" or a path like `docs/never-do-this.md` would otherwise be stored as a
constraint. Filtering works on whole messages, because a fence spans lines.
"""

from __future__ import annotations

import re

from bot.search_terms import jaccard, similarity_tokens

MEMORY_TAG = re.compile(r"<memory>(.*?)</memory>", re.S | re.I)
_FENCE = re.compile(r"^\s*(```|~~~)")
_NOISE_LINE = re.compile(
    r"""^\s*(
        Traceback\ \(most\ recent\ call\ last\)    # Python tracebacks
      | File\ "[^"]+",\ line\ \d+                   # their frames
      | at\ \S+\ \(\S+:\d+(:\d+)?\)                 # JavaScript stack frames
      | \d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?\S*\s+(DEBUG|INFO|WARN|WARNING|ERROR|TRACE)\b  # log lines
      | [$#>]\ \S                                   # shell prompts
      | \[(tool|tool_call|tool_result|function)[^\]]*\]  # tool call markers
      | [{\[][\s\S]*[}\]],?\s*$                     # one-line JSON
    )""",
    re.X | re.I,
)
# A Unix or Windows path, or a relative one with a directory and an extension.
_PATH = re.compile(
    r"(?:(?<![\w/])(?:~|\.{1,2})?/[\w.\-/]+"
    r"|[A-Za-z]:\\[\w.\-\\]+"
    r"|(?<![\w/:])[\w.\-]+(?:/[\w.\-\u4e00-\u9fff]+)+\.[A-Za-z0-9]{1,6}\b)"
)
# A quotation repeats earlier text ("You said: “…”", a reply's "> Alice: …" line):
# distilling it again would store the same fact twice under another speaker.
_QUOTE_LINE = re.compile(r"^\s*>")
_INLINE_QUOTE = re.compile(r"[“\"«「『][^”\"»」』\n]*(?:\s\S+){3,}[^”\"»」』\n]*[”\"»」』]")
_NO_UPDATE = re.compile(
    r"^\s*(无更新|没有更新|无|none|no update|no updates|nothing new|n/?a)?\s*[。.]?\s*$", re.I
)
PATH_PLACEHOLDER = "<path>"


def strip_code_fences(text: str) -> str:
    """Drops fenced code blocks (an unclosed fence runs to the end of the text)."""
    kept: list[str] = []
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            kept.append(line)
    return "\n".join(kept)


def strip_noise(text: str) -> str:
    """Drops tool output, stack frames, log lines and shell commands."""
    return "\n".join(line for line in text.splitlines() if not _NOISE_LINE.match(line))


def strip_quotes(text: str) -> str:
    """Drops quoted lines and long inline quotations."""
    kept = "\n".join(line for line in text.splitlines() if not _QUOTE_LINE.match(line))
    return _INLINE_QUOTE.sub("…", kept)


def hard_filter(text: str) -> str:
    """What is left of a message once code, tool noise and quotations are removed."""
    return strip_quotes(strip_noise(strip_code_fences(text))).strip()


def mask_paths(text: str) -> str:
    """Paths replaced by a placeholder, so their words never decide a classification."""
    return _PATH.sub(PATH_PLACEHOLDER, text)


def extract_memory_tag(text: str) -> str | None:
    """The joined bodies of `<memory>` tags the model wrote, or None without a tag."""
    bodies = [body.strip() for body in MEMORY_TAG.findall(text)]
    return "\n".join(bodies) if bodies else None


def is_no_update(tag_body: str) -> bool:
    """The model said there is nothing to remember ("无更新", "none", an empty tag)."""
    return _NO_UPDATE.match(tag_body) is not None


def is_duplicate(text: str, recent: list[frozenset[str]], threshold: float) -> bool:
    """True when `text` is at least `threshold` Jaccard-similar to a recent text."""
    tokens = similarity_tokens(text)
    if not tokens:
        return True
    return any(jaccard(tokens, seen) >= threshold for seen in recent)
