"""Server-sent events: the data of each event in a streamed HTTP response."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def iter_event_data(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """Yields each event's data; a blank line ends an event, as the SSE spec says.

    `event:`, `id:` and `retry:` fields and `:` comments (keep-alives) are skipped: the
    chat-completions stream carries everything in `data`.
    """
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value.removeprefix(" "))
    # Some servers close the stream without the final blank line.
    if data:
        yield "\n".join(data)
