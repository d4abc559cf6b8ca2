"""What a model server says it reused of a prompt: each server's own fields read into one `Usage`.

Servers report their prompt cache in different words. llama.cpp sends `timings` beside the
answer (`cache_n` tokens reused from the slot, `prompt_n` evaluated); OpenAI, vLLM and
OpenRouter `usage.prompt_tokens_details.cached_tokens`; DeepSeek `prompt_cache_hit_tokens`
and `prompt_cache_miss_tokens`; Anthropic `cache_read_input_tokens` and
`cache_creation_input_tokens` apart from `input_tokens`. A server that names none of them
leaves `Usage.cached_tokens` None: unknown, never zero (zero means it reused nothing).
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.providers.base import Usage


def chat_completions_usage(usage: object, timings: object) -> Usage | None:
    """An OpenAI-compatible answer's `usage` object and llama.cpp's `timings`, as one `Usage`.

    llama.cpp's timings come first: they count what its slot really evaluated. None when
    the server reported neither.
    """
    counts = usage if isinstance(usage, Mapping) else {}
    slot = timings if isinstance(timings, Mapping) else {}
    reused, evaluated = _count(slot.get("cache_n")), _count(slot.get("prompt_n"))
    prompt = _count(counts.get("prompt_tokens"))
    if reused is not None and evaluated is not None:
        prompt = reused + evaluated
    else:
        reused = _cached(counts)
    if not prompt:
        return None
    details = counts.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, Mapping) else None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=_count(counts.get("completion_tokens")) or 0,
        cached_tokens=reused,
        reasoning_tokens=reasoning or 0,
    )


def messages_usage(usage: Mapping[str, int]) -> Usage | None:
    """Anthropic's usage (its newest counts by field name) as one `Usage`; None when empty.

    `input_tokens` leaves out what the cache read and wrote, so the prompt is all three.
    """
    if not usage:
        return None
    read = usage.get("cache_read_input_tokens")
    written = usage.get("cache_creation_input_tokens") or 0
    return Usage(
        prompt_tokens=usage.get("input_tokens", 0) + (read or 0) + written,
        completion_tokens=usage.get("output_tokens", 0),
        cached_tokens=read,
        cache_write_tokens=written,
    )


def _cached(usage: Mapping[str, object]) -> int | None:
    """OpenAI's `prompt_tokens_details.cached_tokens`, else DeepSeek's `prompt_cache_hit_tokens`."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and (cached := _count(details.get("cached_tokens"))) is not None:
        return cached
    return _count(usage.get("prompt_cache_hit_tokens"))


def _count(value: object) -> int | None:
    """A token count the server sent; None for a missing, null or malformed one."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
