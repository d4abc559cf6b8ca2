"""What a stdio MCP server writes to its stderr, as Chorus's own log lines.

A server's stderr is its log ("Knowledge Graph MCP Server running on stdio"): passed straight
through, it lands between the lines of `chorus tools` and `chorus doctor` and, under
`chorus serve`, unattributed among Chorus's log records. Read from a pipe instead, each line
becomes a record of the `bot.tools.mcp.server` logger naming the server, at INFO: shown where
Chorus logs, quiet where a command prints a table.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

logger = logging.getLogger("bot.tools.mcp.server")


def _forward(name: str, reader: TextIO) -> None:
    with reader:
        for line in reader:
            text = line.rstrip()
            if text:
                logger.info("MCP server %s: %s", name, text)


@contextmanager
def server_stderr(name: str) -> Iterator[TextIO]:
    """A file to give the server's process as its stderr, forwarded line by line to the log
    until the server closes it (when it exits)."""
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, "r", encoding="utf-8", errors="replace")
    writer = os.fdopen(write_end, "w", encoding="utf-8")
    # A thread, not a task: the pipe is read with blocking reads, and it ends by itself once
    # every copy of the write end (ours and the child's) is closed.
    thread = threading.Thread(target=_forward, args=(name, reader), name=f"mcp-stderr-{name}", daemon=True)
    thread.start()
    try:
        yield writer
    finally:
        writer.close()
