"""The gateway connection as Discord runs it: compression, RESUME, op 7/9, close codes."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types

import discord
import pytest

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.discord.fake_gateway import SPLIT_ABOVE, ZlibStreamCodec


def discord_zlib_context() -> type:
    """discord.py's own zlib-stream inflater, the one it uses where zstandard is not installed.

    This environment has zstandard, so discord.py would ask for zstd-stream; its module is
    loaded a second time with zstandard hidden to get the zlib class it would use instead.
    """
    spec = importlib.util.find_spec("discord.utils")
    assert spec is not None and spec.loader is not None
    hidden = {name: sys.modules.get(name) for name in ("zstandard", "compression.zstd")}
    try:
        sys.modules.update(dict.fromkeys(hidden))
        module = types.ModuleType("discord._utils_without_zstd")
        module.__package__ = "discord"
        module.__file__ = spec.origin
        assert spec.origin is not None
        with open(spec.origin, encoding="utf-8") as source:
            exec(compile(source.read(), spec.origin, "exec"), module.__dict__)
    finally:
        for name, previous in hidden.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    context: type = module._ZlibDecompressionContext
    return context


async def test_zlib_stream_one_context_per_connection_with_split_payloads(
    start_lane: LaneFactory, fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discord.utils, "_ActiveDecompressionContext", discord_zlib_context())
    await start_lane()
    # Hex digests barely compress, so this payload arrives in two websocket messages.
    long_text = " ".join(hashlib.sha256(str(n).encode()).hexdigest() for n in range(SPLIT_ABOVE // 32))
    await fake_discord.post_message(DM_CHANNEL_ID, long_text)
    await fake_discord.post_message(DM_CHANNEL_ID, "still readable")

    await fake_discord.wait_for_texts(
        DM_CHANNEL_ID, [spoken(f"reply to: {long_text}"), spoken("reply to: still readable")]
    )
    (connection,) = fake_discord.gateway.connections
    assert connection.compress == "zlib-stream"
    assert isinstance(connection.codec, ZlibStreamCodec) and connection.codec.split_payloads >= 2


async def test_the_client_asks_for_the_compression_it_can_read(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "hello")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: hello")])
    (connection,) = fake_discord.gateway.connections
    assert connection.compress == discord.utils._ActiveDecompressionContext.COMPRESSION_TYPE
    assert connection.heartbeats >= 1


async def test_op_7_reconnect_resumes_and_replays_what_was_missed(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane()
    gateway = fake_discord.gateway
    await gateway.request_reconnect()
    # Sent while the client is away: it must come back through RESUME.
    await fake_discord.post_message(DM_CHANNEL_ID, "are you back?")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: are you back?")])
    assert len(gateway.identifies) == 1
    assert [resume["session_id"] for resume in gateway.resumes] == ["session-1"]
    assert gateway.connections[1].path == "/gateway-resume"


async def test_a_dropped_connection_resumes(start_lane: LaneFactory, fake_discord: FakeDiscord) -> None:
    await start_lane()
    gateway = fake_discord.gateway
    await gateway.close(4000, "Unknown error")
    await fake_discord.post_message(DM_CHANNEL_ID, "after the drop")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: after the drop")])
    assert len(gateway.identifies) == 1 and len(gateway.resumes) == 1


async def test_invalid_session_resumable_resumes(start_lane: LaneFactory, fake_discord: FakeDiscord) -> None:
    await start_lane()
    gateway = fake_discord.gateway
    gateway.resumed.clear()
    await gateway.invalidate_session(resumable=True)
    await gateway.resumed.wait()
    await fake_discord.post_message(DM_CHANNEL_ID, "resumed")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: resumed")])
    assert len(gateway.identifies) == 1


async def test_invalid_session_not_resumable_identifies_again(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane()
    gateway = fake_discord.gateway
    await gateway.invalidate_session(resumable=False)
    await fake_discord.wait_until(lambda: len(gateway.identifies) == 2 and gateway.session is not None)
    await fake_discord.wait_until(lambda: gateway.session is not None and gateway.session.id == "session-2")
    await fake_discord.post_message(DM_CHANNEL_ID, "new session")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: new session")])
    # The client closed the invalidated connection cleanly before identifying again.
    assert gateway.connections[0].close_code == 1000
    assert gateway.connections[1].path == "/gateway"


async def test_stopping_the_lane_closes_the_gateway_with_1000(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    lane, _ = await start_lane()

    await lane.stop()

    await fake_discord.wait_until(lambda: fake_discord.close_codes == [1000])
