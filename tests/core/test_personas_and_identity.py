"""Personas, linking accounts across lanes, and fresh sessions."""

from __future__ import annotations

from datetime import timedelta

from bot.storage.database import open_session
from bot.storage.models import LinkCode
from tests.support.runtime import inbound


async def test_persona_switch_tags_the_next_turn_and_keeps_earlier_tags(runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    engine = runtime.engine
    first = await engine.respond(inbound("hello"))
    switched = await engine.respond(inbound("/persona captain"))
    assert switched.kind == "command"
    assert "Captain Reed" in switched.text
    second = await engine.respond(inbound("and now?"))
    assert (first.persona_id, second.persona_id) == ("ada", "captain")
    stored = runtime.stores.messages.messages(second.session_id)
    assert [(m.kind, m.persona_id, m.content) for m in stored if m.role != "user"] == [
        ("message", "ada", "reply to: hello"),
        ("command", None, "/persona captain"),
        ("persona_switch", "captain", "persona switched from ada to captain"),
        ("command_reply", None, switched.text),
        ("message", "captain", "reply to: and now?"),
    ]
    sent = fake_openai.requests[-1].json["messages"]
    assert sent[0]["role"] == "system" and "Captain Reed" in sent[0]["content"]
    history = [(m["role"], m.get("name")) for m in sent[1:]]
    assert history == [("user", "Alice"), ("assistant", "ada"), ("user", "Alice")]


async def test_persona_list_marks_the_active_one_and_unknown_id_is_refused(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    listing = await runtime.engine.respond(inbound("/persona"))
    assert "▶ ada — Ada" in listing.text
    assert "captain — Captain Reed" in listing.text
    unknown = await runtime.engine.respond(inbound("/persona pirate"))
    assert unknown.kind == "error"
    assert "no persona 'pirate'" in unknown.text
    assert "ada, captain, sage" in unknown.text


async def test_status_shows_persona_model_and_context_use(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    await runtime.engine.respond(inbound("hello"))
    status = await runtime.engine.respond(inbound("/status"))
    assert "Persona: Ada (ada)" in status.text
    assert "Model: demo" in status.text
    assert "2 messages in the window" in status.text


async def test_link_code_joins_accounts_into_one_session(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    engine = runtime.engine
    web_turn = await engine.respond(inbound("my name is Ana", lane="web", user_id="visitor-1"))
    code_reply = await engine.respond(inbound("/link", lane="web", user_id="visitor-1"))
    code = code_reply.text.split("Your link code: ")[1].split()[0].strip("`")
    linked = await engine.respond(inbound(f"/link {code}", lane="telegram", user_id="4242"))
    assert linked.kind == "command"
    assert "telegram, web" in linked.text
    tg_turn = await engine.respond(inbound("what is my name?", lane="telegram", user_id="4242"))
    assert tg_turn.session_id == web_turn.session_id
    # The demo model counts the history it received: the web turn is in it.
    assert "I received 2 history messages" in tg_turn.text
    reused = await engine.respond(inbound(f"/link {code}", lane="discord", user_id="99"))
    assert reused.kind == "error"
    assert "already used" in reused.text


async def test_wrong_and_expired_link_codes_are_refused(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    engine = runtime.engine
    wrong = await engine.respond(inbound("/link NOPE1234", lane="telegram", user_id="1"))
    assert wrong.kind == "error" and "not valid" in wrong.text
    code_reply = await engine.respond(inbound("/link", lane="web", user_id="v"))
    code = code_reply.text.split("Your link code: ")[1].split()[0].strip("`")
    with open_session(runtime.database) as db:
        link = db.get(LinkCode, code)
        link.expires_at = link.created_at - timedelta(seconds=1)
        db.add(link)
        db.commit()
    expired = await engine.respond(inbound(f"/link {code}", lane="telegram", user_id="1"))
    assert expired.kind == "error" and "expired" in expired.text
    in_group = await engine.respond(
        inbound("/link", lane="telegram", user_id="1", chat_id="-100", chat_kind="group")
    )
    assert in_group.kind == "error"


async def test_unlink_gives_the_account_its_own_session(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    engine = runtime.engine
    shared = await engine.respond(inbound("hi", lane="web", user_id="v"))
    code = (
        (await engine.respond(inbound("/link", lane="web", user_id="v")))
        .text.split(": ")[1]
        .split()[0]
        .strip("`")
    )
    await engine.respond(inbound(f"/link {code}", lane="telegram", user_id="7"))
    unlinked = await engine.respond(inbound("/unlink", lane="telegram", user_id="7"))
    assert unlinked.kind == "command"
    alone = await engine.respond(inbound("hello again", lane="telegram", user_id="7"))
    assert alone.session_id != shared.session_id
    again = await engine.respond(inbound("/unlink", lane="telegram", user_id="7"))
    assert again.kind == "error"


async def test_new_starts_a_fresh_session_and_keeps_the_old(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    engine = runtime.engine
    old = await engine.respond(inbound("remember the old days"))
    fresh = await engine.respond(inbound("/new"))
    assert fresh.session_id != old.session_id
    after = await engine.respond(inbound("hello"))
    assert after.session_id == fresh.session_id
    assert "I received 0 history messages" in after.text
    assert [m.content for m in runtime.stores.messages.messages(old.session_id)][0] == "remember the old days"


async def test_groups_route_by_chat_and_thread_and_show_sender_names(runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    engine = runtime.engine
    a = await engine.respond(
        inbound(
            "hi all", lane="telegram", user_id="1", display_name="Alice", chat_id="-100", chat_kind="group"
        )
    )
    b = await engine.respond(
        inbound("hello", lane="telegram", user_id="2", display_name="Bob", chat_id="-100", chat_kind="group")
    )
    topic = await engine.respond(
        inbound(
            "in a topic",
            lane="telegram",
            user_id="2",
            display_name="Bob",
            chat_id="-100",
            chat_kind="group",
            thread_id="5",
        )
    )
    private = await engine.respond(inbound("just me", lane="telegram", user_id="1"))
    assert a.session_id == b.session_id
    assert topic.session_id != a.session_id
    assert private.session_id not in {a.session_id, topic.session_id}
    group_request = fake_openai.requests[1].json["messages"]
    assert [m["content"] for m in group_request[1:]] == [
        "Alice: hi all",
        "reply to: Alice: hi all",
        "Bob: hello",
    ]
