"""Dense recall with the real all-MiniLM-L6-v2 weights (the `dense` extra).

Skipped where the extra is not installed; everything else works full-text only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.memory.dense import load_embedder
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore, Owner
from tests.support.runtime import inbound, make_runtime

pytest.importorskip("numpy")
pytest.importorskip("tokenizers")
pytest.importorskip("threadpoolctl")
if load_embedder() is None:
    pytest.skip("the dense extra's model package is not installed", allow_module_level=True)

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
