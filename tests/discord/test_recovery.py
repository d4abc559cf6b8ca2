"""A reply stored but left on Discord as a frozen draft is finished from what was stored.

The process-level crash tests (tests/durable/test_discord_recovery.py) kill `chorus serve`
while the model streams; here the turn got as far as storing its reply, and only the last
edit of its draft never happened — the delivery state a crash in that instant leaves.
"""

from __future__ import annotations

from sqlalchemy import text

from bot.liveness import Liveness
from bot.recovery import Recovery
from bot.runtime import Runtime
from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, FakeDiscord
from tests.durable.serve_process import wait_until
from tests.fakes.openai_server import FakeOpenAI

CURSOR = " ▌"


async def test_a_stored_reply_whose_draft_froze_is_finished_in_place(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    lane, runtime = await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "frozen in a DM")
    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> frozen in a server", mentions=(BOT,))
    await fake_discord.wait_until(
        lambda: (
            fake_discord.texts_in(DM_CHANNEL_ID) == [spoken("reply to: frozen in a DM")]
            and fake_discord.texts_in(CHANNEL_ID) == ["reply to: Alice: frozen in a server"]
        )
    )
    [dm_reply] = fake_discord.sent_in(DM_CHANNEL_ID)
    [persona_reply] = fake_discord.sent_in(CHANNEL_ID)
    assert persona_reply.webhook_id is not None
    # What a process that died between storing the reply and its last edit leaves behind: the
    # drafts still show the streaming text, and the turns are `replied` with no live owner.
    for shown in (dm_reply, persona_reply):
        shown.versions.append("reply to" + CURSOR)
    # A turn the lane showed in full drops its delivery row; once both have, the rows the
    # crash would have left are written back.
    await wait_until(lambda: delivery_rows(runtime) == 0, what="both turns' rows dropped")
    drafts = {
        (str(DM_CHANNEL_ID), "private"): str(dm_reply.id),
        (str(CHANNEL_ID), "group"): f"{persona_reply.id}@webhook:{persona_reply.webhook_id}",
    }
    with runtime.database.begin() as connection:
        for (chat, kind), draft in drafts.items():
            connection.execute(
                text(
                    "INSERT INTO deliveries (user_message_id, session_id, ingest_key, lane, chat_id, "
                    "chat_kind, platform_message_id, draft_id, state, created_at, updated_at) "
                    "SELECT id, session_id, ingest_key, 'discord', platform_chat_id, :kind, "
                    "platform_message_id, :draft, 'replied', created_at, created_at FROM messages "
                    "WHERE role = 'user' AND platform_chat_id = :chat"
                ),
                {"draft": draft, "chat": chat, "kind": kind},
            )
    requests_before = len(fake_openai.requests)

    recovery = Recovery(
        runtime.engine, Liveness(runtime.database, runtime.engine.instance_id), {"discord": lane}
    )
    claimed = recovery.claim()
    assert len(claimed) == 2
    recovery.finish_all(claimed)
    await recovery.wait(60)

    await fake_discord.wait_until(
        lambda: (
            dm_reply.text == spoken("reply to: frozen in a DM")
            and persona_reply.text == "reply to: Alice: frozen in a server"
        )
    )
    # Edited in place (the persona's through its webhook), nothing sent anew, the model not asked.
    assert [m.id for m in fake_discord.sent_in(DM_CHANNEL_ID)] == [dm_reply.id]
    assert [m.id for m in fake_discord.sent_in(CHANNEL_ID)] == [persona_reply.id]
    assert fake_discord.calls_to("PATCH", f"/messages/{persona_reply.id}")[-1].path.startswith("/webhooks/")
    assert len(fake_openai.requests) == requests_before
    with runtime.database.connect() as connection:
        states = connection.execute(text("SELECT state FROM deliveries")).scalars().all()
    assert states == ["delivered", "delivered"]


def delivery_rows(runtime: Runtime) -> int:
    with runtime.database.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM deliveries")).scalar_one())
