"""What a model's window is fitted to, and how answers calibrate the count (bot/windows.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bot.config import ModelSettings, Settings
from bot.errors import OverflowNumbers
from bot.storage import migrate
from bot.storage.database import create_database_engine
from bot.storage.model_profiles import ModelProfileStore
from bot.windows import DEFAULT_WINDOW, ModelWindows


class Server:
    """What `discover_window` answers; counts how often it was asked."""

    def __init__(self, stated: int | None) -> None:
        self.stated = stated
        self.asked = 0

    async def discover(self, model: str) -> int | None:
        self.asked += 1
        return self.stated


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ModelProfileStore]:
    database = create_database_engine(f"sqlite:///{tmp_path / 'chorus.db'}")
    migrate.upgrade(database)
    yield ModelProfileStore(database)
    database.dispose()


def windows(store: ModelProfileStore, server: Server, **settings: object) -> ModelWindows:
    return ModelWindows(Settings(model=ModelSettings(**settings)), store, server.discover)


async def test_a_server_that_says_nothing_keeps_the_default_and_is_asked_once(
    store: ModelProfileStore,
) -> None:
    server = Server(None)
    known = windows(store, server)
    for _ in range(3):
        info = await known.refresh("m")
    assert (info.window, info.source, server.asked) == (DEFAULT_WINDOW, "default", 1)


async def test_configured_beats_learned_beats_stated(store: ModelProfileStore) -> None:
    server = Server(8192)
    known = windows(store, server)
    assert (await known.refresh("m")).source == "stated by the server"
    await known.learn_overflow("m", OverflowNumbers(window=4096, requested=5000), counted=4000)
    assert (known.info("m").window, known.info("m").source) == (4096, "learned")
    configured = windows(store, server, context_windows={"m": 3000})
    assert (await configured.refresh("m")).source == "configured"


async def test_a_lesson_holds_for_a_new_process_until_the_server_states_another_window(
    store: ModelProfileStore,
) -> None:
    await windows(store, Server(8192)).learn_overflow("m", OverflowNumbers(window=4096), counted=5000)
    assert (await windows(store, Server(8192)).refresh("m")).window == 4096
    # The server was restarted with another window: the old lesson no longer holds.
    assert (await windows(store, Server(16384)).refresh("m")).window == 16384


async def test_the_count_is_calibrated_up_at_once_and_down_slowly(store: ModelProfileStore) -> None:
    known = windows(store, Server(8192))
    await known.refresh("m")
    assert not known.info("m").calibrated
    uncalibrated_margin = known.info("m").margin
    await known.observe("m", counted=1000, served=1300)
    assert known.info("m").ratio == pytest.approx(1.3)
    assert known.info("m").margin < uncalibrated_margin
    await known.observe("m", counted=1000, served=1000)
    assert 1.2 < known.info("m").ratio < 1.3
    await known.observe("m", counted=1000, served=1600)
    assert known.info("m").ratio == pytest.approx(1.6)
    # A sample no tokenizer explains is a broken count, not a lesson.
    await known.observe("m", counted=100, served=9000)
    assert known.info("m").ratio == pytest.approx(1.6)
    assert (await windows(store, Server(8192)).refresh("m")).ratio == pytest.approx(1.6)


async def test_the_budget_leaves_the_reply_and_the_margin_out(store: ModelProfileStore) -> None:
    known = windows(store, Server(2048), reply_reserve_tokens=1024, token_margin=0.05)
    info = await known.refresh("m")
    # A small window keeps a quarter for the reply, and three times the margin until calibrated.
    assert info.reply_reserve == 512
    assert info.budget_tokens == int(2048 * (1 - 0.15) - 512)


async def test_an_overflow_without_numbers_narrows_only_a_request_near_the_window(
    store: ModelProfileStore,
) -> None:
    known = windows(store, Server(8192), reply_reserve_tokens=512)
    await known.refresh("m")
    await known.learn_overflow("m", OverflowNumbers(), counted=300)
    assert known.info("m").window == 8192  # a small request refused without numbers teaches nothing
    await known.learn_overflow("m", OverflowNumbers(), counted=7800)
    assert known.info("m").window == int(8192 * 0.75)


def test_processes_storing_a_new_models_profile_at_once_all_succeed(
    database: dict[str, str], tmp_path: Path
) -> None:
    url = database.get("database_url", f"sqlite:///{tmp_path / 'race.db'}")
    engines = [create_database_engine(url) for _ in range(6)]
    migrate.upgrade(engines[0])
    for round_number in range(5):
        model = f"model-{round_number}"
        barrier = threading.Barrier(len(engines))

        def store(engine: Any, ratio: float, model: str = model, barrier: Any = barrier) -> None:
            barrier.wait()
            ModelProfileStore(engine).save_ratio(model, ratio, 1)
            ModelProfileStore(engine).learn_window(model, int(ratio * 1000), None)

        with ThreadPoolExecutor(len(engines)) as pool:
            list(pool.map(store, engines, [1.0 + n / 10 for n in range(len(engines))]))
        stored = ModelProfileStore(engines[0]).read(model)
        # The smallest lesson stays, whatever ratio was stored after it.
        assert stored.learned_window == 1000 and stored.samples == 1
    for engine in engines:
        engine.dispose()
