"""Server-sent events read from a stream, batched by the chunk of the response that completed them."""

from __future__ import annotations

from collections.abc import AsyncIterator

from bot.providers.sse import iter_event_batches


async def chunks_of(*chunks: str) -> AsyncIterator[str]:
    for chunk in chunks:
        yield chunk


async def batches(*chunks: str) -> list[list[str]]:
    return [batch async for batch in iter_event_batches(chunks_of(*chunks))]


async def test_the_events_one_chunk_completes_come_as_one_batch() -> None:
    assert await batches('data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n') == [
        ['{"a": 1}', '{"b": 2}', "[DONE]"]
    ]


async def test_an_event_split_across_chunks_comes_when_its_blank_line_arrives() -> None:
    assert await batches("da", 'ta: {"a"', ": 1}\n", "\n", "data: x\n\n") == [['{"a": 1}'], ["x"]]


async def test_a_crlf_split_between_two_chunks_is_one_line_end() -> None:
    # Were the "\n" read as an empty line, "first" would end before its second data line.
    assert await batches("data: first\r", "\ndata: more\r\n\r\n") == [["first\nmore"]]


async def test_every_line_end_of_the_spec_and_no_other() -> None:
    text = "a\u2028b"  # JSON may carry U+2028 unescaped inside a string
    assert await batches(f"data: {text}\r\rdata: c\n\n") == [[text, "c"]]


async def test_comments_and_other_fields_are_skipped() -> None:
    assert await batches(": keep-alive\n\nevent: delta\nid: 7\nretry: 10\ndata: x\n\n") == [["x"]]


async def test_a_stream_closed_without_its_last_line_end_still_gives_its_event() -> None:
    assert await batches("data: a\n\ndata: last") == [["a"], ["last"]]
