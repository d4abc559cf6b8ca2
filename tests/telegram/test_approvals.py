"""Run and Deny under a Telegram message, pressed through the Bot API stand-in and real aiogram:
a member's call of the filesystem server's `write_file` (destructive: it asks) runs once."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.telegram.bot_api_server import FakeBotAPI, private_text
from tests.tools.mcp_support import READY_SECONDS, npm_server
from tests.tools.test_mcp_turns import telegram_lane

ALICE = 501
WRITE = "fs__write_file"


def question(bot_api: FakeBotAPI) -> int | None:
    """The message that asks about the call, once it has its buttons."""
    for sent in bot_api.messages(ALICE):
        if sent.reply_markup and sent.shown.text.startswith(f"❓ {WRITE}"):
            return sent.message_id
    return None


def asked(bot_api: FakeBotAPI, message_id: int):  # type: ignore[no-untyped-def]
    return next(sent for sent in bot_api.messages(ALICE) if sent.message_id == message_id)


async def test_the_asker_presses_run_twice_and_the_file_is_written_once(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    note = folder / "note.txt"
    fake_openai.script(ToolCalls([(WRITE, {"path": str(note), "content": "buy milk"})]), "Written down.")
    fs = npm_server("filesystem", str(folder))
    async with telegram_lane(runtimes, tmp_path, fake_openai, fs=fs) as (bot_api, runtime):
        bot_api.push(private_text(ALICE, "Write down: buy milk"))
        message_id = await bot_api.wait_for(lambda: question(bot_api), timeout=READY_SECONDS)
        assert not note.exists()
        # Someone else in no position to decide presses first: nothing happens.
        bot_api.press_button(ALICE, message_id, "Run", user_id=777, first_name="Mallory")
        await bot_api.wait_for(lambda: asked(bot_api, message_id).answers, timeout=READY_SECONDS)
        assert not note.exists()
        bot_api.press_button(ALICE, message_id, "Run", user_id=ALICE)
        bot_api.press_button(ALICE, message_id, "Run", user_id=ALICE)
        await bot_api.wait_for(
            lambda: bot_api.sent_texts(ALICE)[-1:] == ["Ada\nWritten down."], timeout=READY_SECONDS
        )
        await bot_api.wait_for(lambda: len(asked(bot_api, message_id).answers) == 3, timeout=READY_SECONDS)
        shown = asked(bot_api, message_id)
        approval = runtime.stores.approvals.recent(1)[0]

    assert note.read_text() == "buy milk"
    assert shown.answers == [
        "Only the person who asked (when a member) or an admin can decide this.",
        "Approved.",
        "Already approved.",
    ]
    assert shown.reply_markup is None and shown.shown.text.endswith("Approved. (Alice)")
    assert (approval.state, approval.decided_by, approval.outcome) == ("approved", f"telegram:{ALICE}", "ok")


async def test_the_asker_presses_deny_and_the_file_is_never_written(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    note = folder / "note.txt"
    fake_openai.script(ToolCalls([(WRITE, {"path": str(note), "content": "sell"})]), "Left alone.")
    fs = npm_server("filesystem", str(folder))
    async with telegram_lane(runtimes, tmp_path, fake_openai, fs=fs) as (bot_api, _):
        bot_api.push(private_text(ALICE, "Write down: sell"))
        message_id = await bot_api.wait_for(lambda: question(bot_api), timeout=READY_SECONDS)
        bot_api.press_button(ALICE, message_id, "Deny", user_id=ALICE)
        await bot_api.wait_for(
            lambda: bot_api.sent_texts(ALICE)[-1:] == ["Ada\nLeft alone."], timeout=READY_SECONDS
        )
    assert not note.exists()
