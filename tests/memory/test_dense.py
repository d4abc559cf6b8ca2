"""Dense recall with the real all-MiniLM-L6-v2 weights (the `dense` extra).

Skipped where the extra is not installed; everything else works full-text only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.memory.dense import Embedder, RememberingEmbedder, load_embedder
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore, Owner
from tests.support.peers import needs_dense_model
from tests.support.runtime import RuntimeFactory, inbound, make_runtime

pytestmark = needs_dense_model

GROUP = {"chat_id": "g5", "chat_kind": "group"}
OWNER = Owner("group", "web:g5")


def test_the_numpy_encoder_matches_sentence_transformers() -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from bot.memory.dense import bundled_model_dir

    texts = ["Melanie: I started taekwondo last week.", "我们决定用新的数据库", "Caroline's art show"]
    ours = load_embedder().embed(texts)  # type: ignore[union-attr]
    reference = sentence_transformers.SentenceTransformer(str(bundled_model_dir()), device="cpu").encode(
        texts, normalize_embeddings=True
    )
    assert (ours * reference).sum(axis=1).min() > 0.999


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
