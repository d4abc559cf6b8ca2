"""Bad input gets a clear reply and leaves nothing half-written."""

from __future__ import annotations

from tests.support.files import pdf_with_text, png_image
from tests.support.runtime import attachment, inbound


def stored_roles(runtime, session_id):
    return [m.role for m in runtime.stores.messages.messages(session_id)]


async def test_empty_message_is_refused(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    reply = await runtime.engine.respond(inbound("   "))
    assert reply.kind == "error"
    assert "empty" in reply.text
    assert stored_roles(runtime, reply.session_id) == []


async def test_a_megabyte_of_text_is_refused_with_the_limit(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    reply = await runtime.engine.respond(inbound("x" * 1_000_000))
    assert reply.kind == "error"
    assert "1,000,000 characters" in reply.text and "32,000" in reply.text
    assert stored_roles(runtime, reply.session_id) == []


async def test_unsupported_attachment_type_is_refused(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    exe = attachment("setup.exe", "application/x-msdownload", b"MZ\x90\x00")
    reply = await runtime.engine.respond(inbound("install this", attachments=(exe,)))
    assert reply.kind == "error"
    assert "setup.exe" in reply.text
    assert stored_roles(runtime, reply.session_id) == []


async def test_corrupt_pdf_is_refused(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    broken = attachment("report.pdf", "application/pdf", b"%PDF-1.4 this is not really a pdf")
    reply = await runtime.engine.respond(inbound("summarise", attachments=(broken,)))
    assert reply.kind == "error"
    assert "report.pdf" in reply.text and "damaged" in reply.text
    assert stored_roles(runtime, reply.session_id) == []


async def test_file_over_the_size_limit_is_refused_before_download(runtimes, tmp_path):
    runtime = runtimes(tmp_path, limits_max_upload_bytes="1000")
    fetched = []

    async def fetch() -> bytes:
        fetched.append(True)
        return b"x" * 5000

    from bot.turns.inbound import InboundAttachment

    big = InboundAttachment(
        kind="document", filename="big.txt", mime_type="text/plain", size=5000, fetch=fetch
    )
    reply = await runtime.engine.respond(inbound("read this", attachments=(big,)))
    assert reply.kind == "error"
    assert "big.txt" in reply.text and "limit" in reply.text
    assert fetched == []


async def test_invalid_utf8_from_a_platform_is_repaired_not_fatal(runtimes, tmp_path):
    runtime = runtimes(tmp_path)
    reply = await runtime.engine.respond(inbound("broken \udcff text\x00 here"))
    assert reply.kind == "assistant"
    user = runtime.stores.messages.messages(reply.session_id)[0]
    assert user.content == "broken \ufffd text here"


async def test_documents_and_images_are_stored_by_reference(runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    pdf = attachment("invoice.pdf", "application/pdf", pdf_with_text("Invoice INV-2291 total 42 EUR"))
    photo = attachment("cat.png", "image/png", png_image(), kind="image")
    reply = await runtime.engine.respond(inbound("what do you see?", attachments=(pdf, photo)))
    assert reply.kind == "assistant"
    user = runtime.stores.messages.messages(reply.session_id)[0]
    assert "base64" not in user.content
    files = runtime.stores.messages.attachments_for([user.id])[user.id]
    assert [(f.kind, f.filename, f.text) for f in files] == [
        ("document", "invoice.pdf", "Invoice INV-2291 total 42 EUR"),
        ("image", "cat.png", None),
    ]
    assert runtime.engine.attachments.path_of(files[1].path).read_bytes() == png_image()
    sent = fake_openai.requests[0].json["messages"][-1]["content"]
    assert "INV-2291" in sent and "[image: cat.png" in sent


async def test_every_document_comes_back_in_every_later_turn(runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    first = attachment("plan.md", "text/markdown", b"# Plan\nShip on 2026-12-01 from /srv/release")
    second = attachment("notes.txt", "text/plain", b"Budget code B-17")
    await runtime.engine.respond(inbound("here is the plan", attachments=(first,)))
    await runtime.engine.respond(inbound("and notes", attachments=(second,)))
    await runtime.engine.respond(inbound("what was the release path?"))
    await runtime.engine.respond(inbound("and the budget code?"))
    for request in fake_openai.requests[2:]:
        body = request.body.decode()
        assert "/srv/release" in body and "B-17" in body


async def test_vision_models_get_images_as_parts(runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, model_vision="true")
    photo = attachment("cat.png", "image/png", png_image(2000, 1000), kind="image")
    await runtime.engine.respond(inbound("look", attachments=(photo,)))
    await runtime.engine.respond(inbound("and again?"))
    for request in fake_openai.requests:
        parts = request.json["messages"][1]["content"]
        assert parts[0] == {"type": "text", "text": "look"}
        assert parts[1]["type"] == "image_url"
        assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_file_size_refusal_shows_sizes_that_differ() -> None:
    from bot.errors import AttachmentTooLarge

    mb = 1_048_576
    assert (
        str(AttachmentTooLarge("a.pdf", int(10.5 * mb), 10 * mb)) == "'a.pdf' is 10.5 MB; the limit is 10 MB."
    )
    assert str(AttachmentTooLarge("b.pdf", 10 * mb + 40_000, 10 * mb)).endswith(
        "is 10.04 MB; the limit is 10 MB."
    )
    assert str(AttachmentTooLarge("c.pdf", 10 * mb + 1, 10 * mb)) == (
        "'c.pdf' is 10,485,761 bytes; the limit is 10,485,760 bytes."
    )
