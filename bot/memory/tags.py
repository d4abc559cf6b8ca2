"""Items the model wrote itself in a `<memory>` tag, taken directly.

Tag contents are already distilled, so they bypass the distiller: scoring them
again would drop lines such as "- 决策：用 pnpm 替代 npm" whose wording carries no
cue the rules know. A line's leading label (决策/约束/结论, decision/constraint/
conclusion/fact) decides its kind; keywords decide only for unlabelled lines.
"""

from __future__ import annotations

import re

from bot.memory.filters import mask_paths
from bot.memory.items import BASE_IMPORTANCE, DistilledItem, MemoryKind

_LABEL = re.compile(r"^(决策|决定|约束|结论|事实|decision|constraint|conclusion|fact)\s*[：:]\s*", re.I)
_LABEL_KINDS: dict[str, MemoryKind] = {
    "决策": "decision",
    "决定": "decision",
    "decision": "decision",
    "约束": "constraint",
    "constraint": "constraint",
    "结论": "conclusion",
    "conclusion": "conclusion",
    "事实": "fact",
    "fact": "fact",
}
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s*")

# Process narration: the line says what comes next, not what was concluded.
# Models write "结论：接下来我要确认…" often enough to inflate conclusions by ~10%.
PROCESS_NARRATION = re.compile(
    r"接下来|下一步|我要|待确认|待验证|还需要|准备|打算|将要"
    r"|\bnext\b|\bI will\b|\bI'll\b|\blet me\b|\bgoing to\b|\bplan to\b|\bneed to (?:check|verify|confirm)\b"
    r"|\bto be (?:confirmed|verified)\b",
    re.I,
)
# Completion words: the line states a result, even if it mentions a next step.
COMPLETION_WORDS = re.compile(
    r"已完成|已确认|已验证|已修复|结论是|因此|所以|说明|表明"
    r"|\bdone\b|\bconfirmed\b|\bverified\b|\bfixed\b|\btherefore\b|\bturns out\b|\bshows\b",
    re.I,
)
CONSTRAINT_WORDS = re.compile(
    r"禁止|严禁|不得|不要|不能|切勿|杜绝|不允许|必须|约束|一律|统一为"
    r"|\bmust\b|\bnever\b|\bdo not\b|\bdon't\b|\bcannot\b|\bcan't\b|\bnot allowed\b|\bforbidden\b"
    r"|\balways\b|\bonly\b|\bno more than\b|\bat most\b|\bat least\b|\brequired?\b",
    re.I,
)
DECISION_WORDS = re.compile(
    r"决策|决定|采用|改用|选型|定为|换成|改成"
    r"|\bdecided?\b|\bdecision\b|\bchose\b|\bchoose\b|\bgo(?:ing)? with\b|\bswitch(?:ed)? to\b"
    r"|\badopt(?:ed)?\b|\binstead of\b|\bwe(?:'ll| will) use\b|\bsettled on\b",
    re.I,
)


def is_process_narration(body: str) -> bool:
    return PROCESS_NARRATION.search(body) is not None and COMPLETION_WORDS.search(body) is None


def classify_tag_line(line: str) -> tuple[MemoryKind, str]:
    """The kind of one tag line and its body without the label."""
    label = _LABEL.match(line)
    if label is not None:
        kind = _LABEL_KINDS[label.group(1).lower()]
        body = line[label.end() :].strip()
        if kind == "conclusion" and is_process_narration(body):
            return "fact", body
        return kind, body
    masked = mask_paths(line)
    if CONSTRAINT_WORDS.search(masked):
        return "constraint", line
    if DECISION_WORDS.search(masked):
        return "decision", line
    return "conclusion", line


def items_from_tag(tag_body: str, seq: int | None = None) -> list[DistilledItem]:
    """One item per non-empty line of a `<memory>` tag."""
    items: list[DistilledItem] = []
    for raw in tag_body.splitlines():
        line = _BULLET.sub("", raw).strip()
        if not line:
            continue
        kind, body = classify_tag_line(line)
        items.append(
            DistilledItem(
                kind=kind,
                content=body or line,
                importance=BASE_IMPORTANCE[kind],
                source="tag",
                seq=seq,
            )
        )
    return items
