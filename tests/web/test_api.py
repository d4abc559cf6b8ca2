from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from bot.turns.events import Reply
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, Writes
from tests.fakes.openai_server import Reply as FakeReply
from tests.support.files import png_image
from tests.support.live_server import LiveServer
from tests.support.runtime import RuntimeFactory, inbound
from tests.web.conftest import ClientFactory
from tests.web.helpers import EventReader, WebVisitor

DEADLINE = 60.0


async def test_healthz_and_openapi_docs(client: httpx.AsyncClient) -> None:
    health = (await client.get("/healthz")).json()
    # The web lane serves this very answer; no other lane runs and no MCP server is configured.
    assert health["lanes"]["web"]["state"] == "running" and health["lanes"]["web"]["reason"] is None
    assert {**health, "lanes": list(health["lanes"])} == {
        "status": "ok",
        "model": "demo",
        "lanes": ["web"],
        "mcp_servers": {},
    }
    docs = await client.get("/docs")
    assert docs.status_code == 200
    # The docs page works offline: its Swagger UI comes from this server, not a CDN.
    assert "cdn." not in docs.text
    assert "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert (await client.get("/docs-assets/swagger-ui-bundle.js")).status_code == 200
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/api/sessions/{session_id}/messages" in paths
    assert "text/event-stream" in str(paths["/api/sessions/{session_id}/messages"]["post"]["responses"])


async def test_demo_page_embeds_the_widget(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert '<script src="/widget.js"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    script = await client.get("/widget.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert "attachShadow" in script.text


async def test_new_visitor_gets_a_token_as_bearer_and_httponly_cookie(client: httpx.AsyncClient) -> None:
    created = await client.post("/api/session", json={"name": "Grace"})
    state = created.json()
    assert state["name"] == "Grace" and state["persona"]["id"] == "ada"
    assert [persona["id"] for persona in state["personas"]] == ["ada", "captain", "sage"]
    cookie = created.headers["set-cookie"]
    assert f"chorus_visitor={state['token']}" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
    # The cookie alone resumes the same visitor; the token is not sent again.
    resumed = (await client.post("/api/session", json={})).json()
    assert resumed["visitor_id"] == state["visitor_id"] and resumed["token"] is None
    client.cookies.clear()
    by_bearer = await client.get("/api/session", headers={"Authorization": f"Bearer {state['token']}"})
    assert by_bearer.json()["session_id"] == state["session_id"]
    assert by_bearer.json()["name"] == "Grace"


async def test_token_is_stored_only_as_a_hash(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    stores = client.runtime.stores  # type: ignore[attr-defined]
    assert stores.visitors.visitor_for_token(visitor.token) == visitor.visitor_id
    with stores.database.connect() as connection:
        rows = connection.exec_driver_sql("select token_hash from visitor_tokens").fetchall()
    assert len(rows) == 1 and rows[0][0] != visitor.token and len(rows[0][0]) == 64


async def test_without_a_valid_token_the_api_answers_401(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/session")).status_code == 401
    wrong = await client.get("/api/session", headers={"Authorization": "Bearer not-a-token"})
    assert wrong.status_code == 401 and "POST /api/session" in wrong.json()["detail"]
    # A stale token on POST /api/session starts a new visitor instead of failing.
    fresh = await client.post("/api/session", headers={"Authorization": "Bearer stale"})
    assert fresh.status_code == 200 and fresh.json()["token"]


async def test_reply_streams_token_by_token_then_done_with_message_and_persona(
    tmp_path: Path, runtimes: RuntimeFactory, fake_openai: FakeOpenAI
) -> None:
    rest_of_reply = asyncio.Event()
    fake_openai.script(
        Writes(
            (
                fake_openai.event("Once "),
                rest_of_reply,
                fake_openai.event("upon a time.") + fake_openai.finish(),
            )
        )
    )
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    async with (
        LiveServer(create_app(runtime)) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=DEADLINE) as client,
    ):
        visitor = await WebVisitor.start(client, name="Grace")
        url = f"/api/sessions/{visitor.session_id}/messages"
        async with client.stream(
            "POST", url, data={"text": "Tell me a story"}, headers=visitor.headers
        ) as body:
            assert body.headers["content-type"].startswith("text/event-stream")
            events = EventReader(body)
            # The model has sent one piece and waits: the browser has that piece already.
            first = await asyncio.wait_for(events.next(), DEADLINE)
            assert (first.name, first.data["text"]) == ("delta", "Once ")
            rest_of_reply.set()
            rest = [event async for event in events]
        assert [(event.name, event.data.get("text")) for event in rest[:-1]] == [("delta", "upon a time.")]
        done = rest[-1]
        assert (done.name, done.data["text"]) == ("done", "Once upon a time.")
        assert done.data["kind"] == "assistant" and done.data["status"] == "complete"
        assert (done.data["persona_id"], done.data["persona_name"]) == ("ada", "Ada")
        page = await visitor.history()
    user, reply = page["messages"]
    assert (user["role"], user["text"], user["sender_name"], user["lane"]) == (
        "user",
        "Tell me a story",
        "Grace",
        "web",
    )
    assert reply["id"] == done.data["message_id"] and reply["persona_name"] == "Ada"


async def test_a_retried_post_with_the_same_client_id_is_stored_once(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    first = await visitor.say("hello once", client_id="retry-1")
    again = await visitor.say("hello once", client_id="retry-1")
    assert again[-1].name == "done" and again[-1].data["message_id"] == first[-1].data["message_id"]
    assert again[-1].data["text"] == first[-1].data["text"]
    assert [message["text"] for message in (await visitor.history())["messages"]][0] == "hello once"
    assert len((await visitor.history())["messages"]) == 2
    bad = await visitor.post_message("x", client_id="no spaces allowed")
    assert bad.status_code == 422


async def test_image_and_document_uploads_are_stored_and_served_to_their_owner(
    client: httpx.AsyncClient,
) -> None:
    visitor = await WebVisitor.start(client)
    image = png_image(40, 30)
    events = await visitor.say(
        "look",
        files=[
            ("files", ("photo.png", image, "image/png")),
            ("files", ("notes.md", b"# Plan\nship it", "text/markdown")),
        ],
    )
    assert "2 attachments" in events[-1].data["text"]
    files = (await visitor.history())["messages"][0]["attachments"]
    assert [(item["kind"], item["filename"], item["size"]) for item in files] == [
        ("image", "photo.png", len(image)),
        ("document", "notes.md", 14),
    ]
    served_image = await visitor.get(files[0]["url"])
    assert served_image.content == image and served_image.headers["content-type"] == "image/png"
    served_document = await visitor.get(files[1]["url"])
    assert served_document.content == b"# Plan\nship it"
    assert served_document.headers["content-disposition"].startswith("attachment")
    assert served_document.headers["x-content-type-options"] == "nosniff"


async def test_upload_size_count_and_type_limits(make_client: ClientFactory) -> None:
    client = await make_client(limits_max_upload_bytes=1000)
    visitor = await WebVisitor.start(client)
    too_big = await visitor.post_message("x", files=[("files", ("big.txt", b"a" * 1001, "text/plain"))])
    assert too_big.status_code == 413 and "big.txt" in too_big.json()["detail"]
    whole_body = await visitor.post_message("x", files=[("files", ("huge.txt", b"a" * 10_000, "text/plain"))])
    assert whole_body.status_code == 413
    program = await visitor.post_message(
        "x", files=[("files", ("setup.exe", b"MZ", "application/x-msdownload"))]
    )
    assert program.status_code == 415 and "setup.exe" in program.json()["detail"]
    # The refusal names every accepted format.
    for name in ("PNG", "JPEG", "GIF", "WebP", "PDF", "TXT", "Markdown", "CSV", "JSON"):
        assert name in program.json()["detail"]
    many = [("files", (f"n{index}.txt", b"n", "text/plain")) for index in range(6)]
    six = await visitor.post_message("x", files=many)
    assert six.status_code == 413 and "at most 5 files" in six.json()["detail"]
    assert (await visitor.history())["messages"] == []


async def test_a_visitor_cannot_read_post_to_or_stream_another_visitors_session(
    client: httpx.AsyncClient,
) -> None:
    alice = await WebVisitor.start(client, name="Alice")
    await alice.say("my secret", files=[("files", ("secret.txt", b"top secret", "text/plain"))])
    attachment_url = (await alice.history())["messages"][0]["attachments"][0]["url"]
    mallory = await WebVisitor.start(client, name="Mallory")
    assert mallory.session_id != alice.session_id

    read = await mallory.get(f"/api/sessions/{alice.session_id}/messages")
    assert read.status_code == 403
    posted = await mallory.post_message("injected", session_id=alice.session_id)
    assert posted.status_code == 403 and "event:" not in posted.text
    switched = await client.post(
        f"/api/sessions/{alice.session_id}/persona", json={"persona_id": "sage"}, headers=mallory.headers
    )
    assert switched.status_code == 403
    assert (await mallory.get(attachment_url)).status_code == 403
    assert (await mallory.get("/api/sessions/0123456789abcdef/messages")).status_code == 404
    assert (await mallory.get("/api/attachments/999")).status_code == 404
    texts = [message["text"] for message in (await alice.history())["messages"]]
    assert texts[0] == "my secret" and "injected" not in texts and len(texts) == 2
    assert (await alice.refresh())["persona"]["id"] == "ada"


async def test_cookie_writes_from_a_foreign_origin_are_refused(client: httpx.AsyncClient) -> None:
    state = (await client.post("/api/session", json={})).json()
    attack = await client.post(
        f"/api/sessions/{state['session_id']}/messages",
        data={"text": "from evil"},
        headers={"Origin": "http://evil.test"},
    )
    assert attack.status_code == 403
    own = await client.post(
        f"/api/sessions/{state['session_id']}/messages",
        data={"text": "from the demo page"},
        headers={"Origin": "http://chat.test"},
    )
    assert own.status_code == 200 and "event: done" in own.text


async def test_cors_allows_only_configured_embedding_origins(make_client: ClientFactory) -> None:
    client = await make_client(channels_web_cors_origins=["https://shop.example"])
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    allowed = await client.options("/api/session", headers={"Origin": "https://shop.example", **preflight})
    assert allowed.headers["access-control-allow-origin"] == "https://shop.example"
    refused = await client.options("/api/session", headers={"Origin": "https://evil.example", **preflight})
    assert "access-control-allow-origin" not in refused.headers


async def test_rate_limit_answers_429_with_retry_after(make_client: ClientFactory) -> None:
    client = await make_client(channels_web_rate_limit_per_minute=2)
    visitor = await WebVisitor.start(client)
    other = await WebVisitor.start(client)
    await visitor.say("one")
    await visitor.say("two")
    limited = await visitor.post_message("three")
    assert limited.status_code == 429
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert "limit: 2 a minute" in limited.json()["detail"]
    # The limit is per visitor.
    assert (await other.say("hi"))[-1].name == "done"


async def test_persona_switch_tags_the_next_reply(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    switched = await client.post(
        f"/api/sessions/{visitor.session_id}/persona", json={"persona_id": "captain"}, headers=visitor.headers
    )
    assert switched.status_code == 200
    assert switched.json()["persona"] == {
        "id": "captain",
        "name": "Captain Reed",
        "greeting": "Ahoy! Captain Reed at the helm. Where are we sailing today?",
    }
    done = (await visitor.say("where to?"))[-1]
    assert (done.data["persona_id"], done.data["persona_name"]) == ("captain", "Captain Reed")
    unknown = await client.post(
        f"/api/sessions/{visitor.session_id}/persona", json={"persona_id": "nobody"}, headers=visitor.headers
    )
    assert unknown.status_code == 422 and "nobody" in unknown.json()["detail"]


async def test_chat_commands_work_and_new_moves_to_a_fresh_session(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    help_done = (await visitor.say("/help"))[-1]
    assert (
        help_done.name == "done"
        and help_done.data["kind"] == "command"
        and "/persona" in help_done.data["text"]
    )
    await visitor.say("remember me")
    old_session = visitor.session_id
    new_done = (await visitor.say("/new"))[-1]
    assert new_done.data["kind"] == "command" and new_done.data["session_id"] != old_session
    assert (await visitor.refresh())["session_id"] == new_done.data["session_id"]
    assert (await visitor.history())["messages"] == []
    # The old conversation stays readable, but new messages go to the current one.
    old_page = await visitor.get(f"/api/sessions/{old_session}/messages")
    old_messages = [message for message in old_page.json()["messages"] if message["event"] is None]
    assert old_messages[0]["text"] == "remember me"
    stale = await visitor.post_message("late", session_id=old_session)
    assert stale.status_code == 409 and new_done.data["session_id"] in stale.json()["detail"]


async def test_link_code_shown_on_the_web_joins_a_telegram_account(client: httpx.AsyncClient) -> None:
    engine = client.runtime.engine  # type: ignore[attr-defined]
    visitor = await WebVisitor.start(client)
    await visitor.say("started on the web")
    shown = (await visitor.say("/link"))[-1].data["text"]
    code = shown.split("Your link code: ")[1].split()[0].strip("`")
    linked = await engine.respond(inbound(f"/link {code}", lane="telegram", user_id="tg-7"))
    assert linked.kind == "command" and linked.session_id == visitor.session_id
    reply: Reply = await engine.respond(inbound("and now from telegram", lane="telegram", user_id="tg-7"))
    assert reply.session_id == visitor.session_id
    texts = [message["text"] for message in (await visitor.history())["messages"] if message["event"] is None]
    assert texts[0] == "started on the web" and texts[2] == "and now from telegram"


async def test_link_code_from_telegram_entered_on_the_web_shares_the_session(
    client: httpx.AsyncClient,
) -> None:
    engine = client.runtime.engine  # type: ignore[attr-defined]
    first = await engine.respond(inbound("hello from telegram", lane="telegram", user_id="tg-8"))
    shown = await engine.respond(inbound("/link", lane="telegram", user_id="tg-8"))
    code = shown.text.split("Your link code: ")[1].split()[0].strip("`")
    visitor = await WebVisitor.start(client)
    done = (await visitor.say(f"/link {code}"))[-1]
    assert done.data["kind"] == "command" and "Linked" in done.data["text"]
    assert done.data["session_id"] == first.session_id
    assert (await visitor.refresh())["session_id"] == first.session_id
    texts = [message["text"] for message in (await visitor.history())["messages"]]
    assert texts[0] == "hello from telegram"
    reply = (await visitor.say("and on the web"))[-1]
    assert reply.data["session_id"] == first.session_id


async def test_history_pages_back_to_the_start(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    for number in range(3):
        await visitor.say(f"message {number}")
    seen: list[str] = []
    before = None
    while True:
        page = await visitor.history(limit=2, **({"before": before} if before else {}))
        seen = [message["text"] for message in page["messages"]] + seen
        before = page["next_before"]
        if before is None:
            break
    assert len(seen) == 6
    assert [text for text in seen if text.startswith("message")] == ["message 0", "message 1", "message 2"]


async def test_message_text_is_returned_verbatim_never_escaped_into_html(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    attack = '<img src=x onerror="alert(1)">'
    await visitor.say(attack)
    assert (await visitor.history())["messages"][0]["text"] == attack


async def test_disabled_web_lane_keeps_only_healthz(make_client: ClientFactory) -> None:
    client = await make_client(channels_web_enabled="false")
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.post("/api/session")).status_code == 404
    assert (await client.get("/")).status_code == 404
    assert (await client.get("/widget.js")).status_code == 404


async def test_history_shows_commands_their_answers_and_persona_switches_as_events(
    client: httpx.AsyncClient,
) -> None:
    visitor = await WebVisitor.start(client)
    await visitor.say("hello")
    help_text = (await visitor.say("/help"))[-1].data["text"]
    switched = await client.post(
        f"/api/sessions/{visitor.session_id}/persona", json={"persona_id": "sage"}, headers=visitor.headers
    )
    shown = [(m["role"], m["event"], m["text"]) for m in (await visitor.history())["messages"]]
    assert shown[2:] == [
        ("system", "command", "/help"),
        ("system", "command_reply", help_text),
        ("system", "command", "/persona sage"),
        ("system", "persona_switch", "Now speaking: Sage"),
        ("system", "command_reply", switched.json()["text"]),
    ]
    assert [event for _, event, _ in shown[:2]] == [None, None]


async def test_status_and_context_name_the_same_model(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    status = (await visitor.say("/status"))[-1].data["text"]
    context = (await visitor.say("/context"))[-1].data["text"]
    assert "Model: demo" in status and "model demo" in context


async def test_token_pieces_are_coalesced_into_fewer_events(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    pieces = [f"w{number} " for number in range(40)]
    fake_openai.script(FakeReply("".join(pieces), chunks=pieces, delay=0.005))
    client = await make_client(model_base_url=fake_openai.base_url)
    events = await (await WebVisitor.start(client)).say("stream please")
    deltas = [event.data["text"] for event in events if event.name == "delta"]
    # The first piece goes out at once, the rest at most one event per 50 ms: far fewer than 40.
    assert deltas[0] == "w0 " and 1 < len(deltas) < len(pieces)
    assert "".join(deltas) == events[-1].data["text"] == "".join(pieces)
