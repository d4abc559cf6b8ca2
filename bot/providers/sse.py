"""Server-sent events: the data of the events in a streamed HTTP response, a batch per chunk.

A model streams a token per event. A server or a proxy in front of it may write several
events in one HTTP chunk (one that buffers its output, one that flushes a batch of tokens),
and handing them on one at a time costs a pass through every layer above (provider, engine,
lane) per token; the events one chunk completes are handed on together. httpx hands on a
chunked response one HTTP chunk at a time, so events sent in separate chunks go on
separately, even when one network read brought them all.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator

# The SSE spec's line ends. Not str.splitlines(), which also splits at characters such
# as U+2028 that JSON may carry unescaped inside a string.
LINE_END = re.compile(r"\r\n|\r|\n")


async def iter_event_batches(chunks: AsyncIterable[str]) -> AsyncIterator[list[str]]:
    """Yields the data of the events each received chunk of text completes, in order.

    An event may be cut across chunks anywhere, even inside a line end.

    A blank line ends an event, as the SSE spec says. `event:`, `id:` and `retry:` fields
    and `:` comments (keep-alives) are skipped: the chat-completions stream carries
    everything in `data`.
    """
    pending = ""
    data: list[str] = []
    after_cr = False
    async for chunk in chunks:
        if after_cr and chunk.startswith("\n"):
            # The second half of a "\r\n" split between two reads: not an empty line.
            chunk = chunk[1:]
        after_cr = chunk.endswith("\r")
        pending += chunk
        lines = LINE_END.split(pending)
        # The last piece has no line end yet.
        pending = lines.pop()
        completed: list[str] = []
        for line in lines:
            if not line:
                if data:
                    completed.append("\n".join(data))
                    data = []
                continue
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value.removeprefix(" "))
        if completed:
            yield completed
    # Some servers close the stream without the final line end or blank line.
    name, _, value = pending.partition(":")
    if name == "data":
        data.append(value.removeprefix(" "))
    if data:
        yield ["\n".join(data)]
