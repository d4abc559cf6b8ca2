"""Reads and writes of long-term memory: items, full-text recall, vectors and offload cursors.

`MemoryStore` is one store over one database, made of a class per concern, each in its
own module: `memory_items` (the items), `memory_search` (full-text recall),
`memory_vectors` (the vectors of dense recall) and `memory_cursors` (the offload cursor,
which commits items and their cursor together). Every query is scoped by `Owner`.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.memory_cursors import MemoryCursors
from bot.storage.memory_items import MemoryItems
from bot.storage.memory_search import MemorySearch
from bot.storage.memory_vectors import MemoryVectors


class MemoryStore(MemoryItems, MemorySearch, MemoryVectors, MemoryCursors):
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database
