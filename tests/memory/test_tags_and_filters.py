"""`<memory>` tags, the seed's labelled-line rules and the hard filter."""

from __future__ import annotations

from bot.memory.filters import extract_memory_tag, hard_filter, is_no_update, mask_paths
from bot.memory.tags import items_from_tag


def kinds_and_bodies(tag: str) -> list[tuple[str, str]]:
    return [(item.kind, item.content) for item in items_from_tag(tag)]


def test_labelled_lines_are_taken_as_written() -> None:
    # The seed's example: rule scoring would drop this line; the tag keeps it.
    assert kinds_and_bodies("- 决策：用 pnpm 替代 npm") == [("decision", "用 pnpm 替代 npm")]
    assert kinds_and_bodies("约束: 禁止直接推送 main") == [("constraint", "禁止直接推送 main")]


def test_the_leading_label_wins_over_keywords_in_the_body() -> None:
    # "约束" inside a conclusion must not hijack it into a constraint.
    assert kinds_and_bodies("- 结论：配置里的约束→preference 映射是对的") == [
        ("conclusion", "配置里的约束→preference 映射是对的")
    ]


def test_process_narration_labelled_as_conclusion_is_downgraded_to_fact() -> None:
    assert kinds_and_bodies("- 结论：接下来我要确认工具参数存放在哪里") == [
        ("fact", "接下来我要确认工具参数存放在哪里")
    ]
    # A completion word keeps it a conclusion even with a process word.
    assert kinds_and_bodies("结论：已确认下一步只改 cursor 模块")[0][0] == "conclusion"
    assert kinds_and_bodies("Conclusion: next I'll check the logs") == [("fact", "next I'll check the logs")]
    assert kinds_and_bodies("Conclusion: the leak is fixed, next I'll tidy up")[0][0] == "conclusion"


def test_english_labels_and_importance() -> None:
    items = items_from_tag(
        "Decision: store memory per owner\n* constraint: never mix group and private memory\n"
        "conclusion: FTS5 is fast enough"
    )
    assert [(item.kind, item.content, item.importance, item.source) for item in items] == [
        ("decision", "store memory per owner", 7, "tag"),
        ("constraint", "never mix group and private memory", 7, "tag"),
        ("conclusion", "FTS5 is fast enough", 6, "tag"),
    ]


def test_unlabelled_lines_fall_back_to_keywords_but_not_inside_paths() -> None:
    assert kinds_and_bodies("- 必须先跑测试") == [("constraint", "必须先跑测试")]
    assert kinds_and_bodies("- 改用 SQLite") == [("decision", "改用 SQLite")]
    # `docs/禁止.md` is a file name, not a prohibition.
    assert kinds_and_bodies("- 看下 docs/禁止.md") == [("conclusion", "看下 docs/禁止.md")]


def test_memory_tags_are_extracted_and_no_update_is_recognised() -> None:
    reply = "Here you go.\n<memory>\n- 决策：用 pnpm\n</memory>\nmore text <memory>无更新</memory>"
    assert extract_memory_tag(reply) == "- 决策：用 pnpm\n无更新"
    assert extract_memory_tag("no tag here") is None
    assert is_no_update("无更新") and is_no_update("  none. ") and is_no_update("")
    assert not is_no_update("决策：用 pnpm")


def test_hard_filter_strips_code_tool_noise_and_quotes() -> None:
    text = (
        "We decided to keep the cache.\n"
        "```python\nraise SystemExit('you must never do this')\n```\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 3, in <module>\n'
        "$ rm -rf build\n"
        "> Alice: we must ship today\n"
        'You said: "we must ship it today please".\n'
        "The tests pass now."
    )
    assert hard_filter(text) == "We decided to keep the cache.\nYou said: ….\nThe tests pass now."


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert hard_filter("Keep this.\n```\ncode that never closes\nmust not leak") == "Keep this."


def test_paths_are_masked_for_classification() -> None:
    assert mask_paths("see docs/never-do-this.md and /etc/chorus/config.yaml") == "see <path> and <path>"
