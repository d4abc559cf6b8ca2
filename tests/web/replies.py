"""Replies in Markdown as models write them, and hostile ones, for the widget's and the console's tests."""

from __future__ import annotations

FRUITS = """## Fruits

Here are **three fruits** and *why* people like them, from [the list](https://example.org/fruits).

1. **Apple** — crisp
2. **Banana** — sweet
   - rich in potassium
3. **Cherry** — tart

| Fruit | Colour | Season |
|---|---|---|
| Apple | red | autumn |
| Banana | yellow | all year |

> A fruit a day keeps the doctor away.

```python
def ripe(fruit: str) -> bool:
    return fruit in {"apple", "banana"}
```

That is all."""

# Everything a reply might carry to run code in the page: each sets window.__xss if it ever runs.
HOSTILE = """Some <b>bold?</b> text.

<script>window.__xss = 1</script>

<img src=x onerror="window.__xss = 2">

<svg onload="window.__xss = 3"><circle r="5"/></svg>

<iframe srcdoc="<script>parent.__xss = 4</script>"></iframe>

<a href="javascript:window.__xss = 5">a raw link</a>

[a javascript link](javascript:window.__xss=6) and [an upper-case one](JaVaScRiPt:window.__xss=7) and
[a data link](data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX194c3M9ODwvc2NyaXB0Pg==) and
[an entity one](jav&#x09;ascript:window.__xss=9) and <javascript:window.__xss=10> and
[a page of the site it is on](/account/delete?confirm=1) and [a file](file:///etc/passwd)

![an image](x" onerror="window.__xss=11) ![a tracker](https://tracker.invalid/p.png?secret=1)

Inline `<img src=x onerror="window.__xss=12">` code.

```html
<script>window.__xss = 13</script>
<img src=x onerror="window.__xss = 14">
```

[a safe link](https://example.org/safe)"""

WIDE_TABLE = "| " + " | ".join(f"Column {n}" for n in range(1, 11)) + " |\n" + "|---" * 10 + "|\n"
WIDE_TABLE += "".join(
    "| " + " | ".join(f"value {row}.{n}" for n in range(1, 11)) + " |\n" for row in range(1, 6)
)


def long_code(lines: int) -> str:
    """A Python code block of `lines` lines, fenced."""
    body = "\n".join(
        f"value_{index} = compute({index}, 'row {index}')  # line {index}" for index in range(lines)
    )
    return f"```python\n{body}\n```"


def by_lines(text: str, lines_per_piece: int = 1) -> list[str]:
    """`text` in pieces of whole lines, as a model streams a long answer."""
    lines = text.splitlines(keepends=True)
    return [
        "".join(lines[start : start + lines_per_piece]) for start in range(0, len(lines), lines_per_piece)
    ]
