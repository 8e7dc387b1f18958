"""A small, safe Markdown renderer for eval cards: headings, tables, lists, paragraphs, `code`
and **bold** — the subset `service.cards.card` writes — and nothing else.

Every piece of text is HTML-escaped before any markup is added, so a suite owner's card text or
an agent label holding `<script>` is shown literally; no raw HTML, no links, no images pass
through. Anything it does not recognise is a paragraph of escaped text.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_LIST = re.compile(r"^[-*]\s+(.*)$")
_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def inline(text: str) -> str:
    """Escaped text with `code` and **bold** spans (the only inline markup)."""
    out: list[str] = []
    last = 0
    for match in _CODE.finditer(text):
        out.append(_bold(str(escape(text[last:match.start()]))))
        out.append(f"<code>{escape(match.group(1))}</code>")
        last = match.end()
    out.append(_bold(str(escape(text[last:]))))
    return "".join(out)


def _bold(escaped: str) -> str:
    return _BOLD.sub(lambda m: f"<strong>{m.group(1)}</strong>", escaped)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    cells = re.split(r"(?<!\\)\|", body)
    return [c.strip().replace("\\|", "|") for c in cells]


def render(markdown: str) -> Markup:
    """The card's Markdown as safe HTML."""
    lines = markdown.splitlines()
    html: list[str] = []
    para: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if para:
            html.append(f"<p>{inline(' '.join(para))}</p>")
            para.clear()
        if items:
            html.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
        elif heading := _HEADING.match(stripped):
            flush()
            level = len(heading.group(1))
            html.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif stripped.startswith("|") and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
            flush()
            head = _cells(stripped)
            rows: list[list[str]] = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            html.append(_table(head, rows))
            continue
        elif item := _LIST.match(stripped):
            if para:
                flush()
            items.append(item.group(1))
        elif items and line[:1].isspace():  # a list item's continuation line
            items[-1] += " " + stripped
        else:
            if items:
                flush()
            para.append(stripped)
        i += 1
    flush()
    return Markup("\n".join(html))


def _table(head: list[str], rows: list[list[str]]) -> str:
    # Each cell names its column (`data-label`), so a narrow screen can stack a row's cells under
    # their names (style.css) instead of squeezing five columns into a phone's width.
    names = [str(escape(c.replace("`", "").replace("**", ""))) for c in head]
    out = ['<div class="scroll"><table class="stack"><thead><tr>']
    out += [f'<th scope="col">{inline(c)}</th>' for c in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td data-label="{names[i] if i < len(names) else ""}">{inline(c)}</td>' for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)
