from __future__ import annotations

from tests.discord.conftest import LaneFactory
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, message_text


async def test_every_engine_command_is_registered_as_a_slash_command(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    _, runtime = await start_lane()

    registered = {command["name"]: command for command in fake_discord.registered_commands}
    assert list(registered) == [name for name, _ in runtime.engine.commands.describe()]
    options = registered["persona"]["options"]
    assert [(o["name"], o["type"], o["required"]) for o in options] == [("args", 3, False)]


async def test_a_slash_command_is_deferred_then_answered_by_the_engine(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()

    interaction = await fake_discord.run_slash_command("persona", "captain", channel_id=CHANNEL_ID)

    await fake_discord.wait_until(lambda: bool(interaction.followups))
    assert [callback["type"] for callback in interaction.callbacks] == [5]
    assert interaction.followups[0].startswith("Switched to Captain Reed (captain).")
    # The switch applies to the channel's group session.
    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> ahoy", mentions=(BOT,))
    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: ahoy"])
    assert "You are Captain Reed" in message_text(fake_openai.requests[0].messages[0])


async def test_a_slash_command_in_a_dm_without_arguments(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane()

    interaction = await fake_discord.run_slash_command("persona", None, channel_id=DM_CHANNEL_ID)

    await fake_discord.wait_until(lambda: bool(interaction.followups))
    assert interaction.followups[0].splitlines()[:2] == ["Personas:", "▶ ada — Ada"]
