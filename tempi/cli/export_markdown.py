"""Markdown to HTML for the exported session page, at export time and without a library.

It covers what models write: headings, paragraphs, emphasis, inline code, fenced code,
lists, quotes, rules, pipe tables and links. Every piece of the input is escaped before
any tag is added, so message text can never inject markup or script into the page; links
keep only http(s), mailto and in-page targets.
"""

from __future__ import annotations

import re
from html import escape, unescape

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_BULLET = re.compile(r"^( {0,3})([-*+])\s+(.*)$")
_ORDERED = re.compile(r"^( {0,3})(\d{1,9})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}> ?(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")

_SAFE_SCHEMES = ("http://", "https://", "mailto:", "#")

# Inline patterns run on text that is already escaped, so `<`, `>`, `&` and quotes in the
# message can only ever come out as entities.
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_AUTOLINK = re.compile(r"&lt;(https?://[^\s&]+)&gt;")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])|(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])")
_DEL = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")


def _link(match: re.Match[str]) -> str:
    label, target = match.group(1), match.group(2)
    if not unescape(target).strip().lower().startswith(_SAFE_SCHEMES):
        return match.group(0)
    return f'<a href="{target}" rel="noopener noreferrer">{label}</a>'


def _emphasis(text: str) -> str:
    text = _LINK.sub(_link, text)
    text = _AUTOLINK.sub(lambda m: f'<a href="{m.group(1)}" rel="noopener noreferrer">{m.group(1)}</a>', text)
    text = _STRONG.sub(lambda m: f"<strong>{m.group(2)}</strong>", text)
    text = _EM.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", text)
    return _DEL.sub(lambda m: f"<del>{m.group(1)}</del>", text)


def render_inline(text: str) -> str:
    """One line or paragraph of markdown as HTML; code spans are taken literally."""
    out: list[str] = []
    pos = 0
    for match in re.finditer(r"(`+)(.+?)\1(?!`)", text, flags=re.S):
        out.append(_emphasis(escape(text[pos : match.start()])))
        code = match.group(2)
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(f"<code>{escape(code)}</code>")
        pos = match.end()
    out.append(_emphasis(escape(text[pos:])))
    return "".join(out).replace("\n", "<br>\n")


def _split_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]


def _table(lines: list[str]) -> str:
    head = _split_row(lines[0])
    aligns = []
    for cell in _split_row(lines[1]):
        left, right = cell.startswith(":"), cell.endswith(":")
        aligns.append("center" if left and right else "right" if right else "left" if left else "")

    def row(cells: list[str], tag: str) -> str:
        parts = []
        for i, cell in enumerate(cells[: len(head)] + [""] * (len(head) - len(cells))):
            align = aligns[i] if i < len(aligns) and aligns[i] else ""
            style = f' style="text-align:{align}"' if align else ""
            parts.append(f"<{tag}{style}>{render_inline(cell)}</{tag}>")
        return f"<tr>{''.join(parts)}</tr>"

    body = "".join(row(_split_row(line), "td") for line in lines[2:])
    return f"<table><thead>{row(head, 'th')}</thead><tbody>{body}</tbody></table>"


def _starts_block(line: str) -> bool:
    return bool(
        _FENCE.match(line)
        or _HEADING.match(line)
        or _RULE.match(line)
        or _BULLET.match(line)
        or _ORDERED.match(line)
        or _QUOTE.match(line)
    )


def _list(lines: list[str], start: int, ordered: bool) -> tuple[str, int]:
    """A list from `start`; items continue over indented lines, nested lists included."""
    pattern = _ORDERED if ordered else _BULLET
    items: list[list[str]] = []
    first = pattern.match(lines[start])
    assert first is not None
    indent = len(first.group(1))
    i = start
    while i < len(lines):
        line = lines[i]
        match = pattern.match(line)
        if match and len(match.group(1)) == indent:
            items.append([match.group(3)])
        elif line.strip() == "":
            following = lines[i + 1] if i + 1 < len(lines) else ""
            nxt = pattern.match(following)
            if not (following.startswith("  ") or (nxt and len(nxt.group(1)) == indent)):
                break
            items[-1].append("")
        elif line.startswith("  ") or (items and not _starts_block(line) and items[-1][-1] != ""):
            # Continuation: dedent by the marker's width so nested lists are seen as lists.
            items[-1].append(line[min(len(line) - len(line.lstrip()), indent + 4) :])
        else:
            break
        i += 1
    tag = "ol" if ordered else "ul"
    number = int(first.group(2)) if ordered else 1
    attrs = f' start="{number}"' if ordered and number != 1 else ""
    rendered = []
    for item in items:
        inner = render_markdown("\n".join(item))
        # A tight item (no blank line) shows its text without paragraph margins.
        if "" not in item and inner.startswith("<p>"):
            end = inner.index("</p>")
            inner = inner[3:end] + inner[end + 4 :]
        rendered.append(f"<li>{inner}</li>")
    return f"<{tag}{attrs}>{''.join(rendered)}</{tag}>", i


def render_markdown(text: str) -> str:
    """A message's markdown as HTML blocks."""
    lines = text.replace("\r\n", "\n").replace("\t", "    ").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(2)
            lang = fence.group(3)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker[0] * len(marker)):
                body.append(lines[i])
                i += 1
            i += 1
            cls = f' class="language-{escape(lang)}"' if lang else ""
            out.append(f"<pre><code{cls}>{escape(chr(10).join(body))}</code></pre>")
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{render_inline(heading.group(2) or '')}</h{level}>")
            i += 1
            continue
        if _RULE.match(line):
            out.append("<hr>")
            i += 1
            continue
        if _QUOTE.match(line):
            quoted = []
            while i < len(lines) and (m := _QUOTE.match(lines[i])):
                quoted.append(m.group(1))
                i += 1
            out.append(f"<blockquote>{render_markdown(chr(10).join(quoted))}</blockquote>")
            continue
        if _BULLET.match(line) or _ORDERED.match(line):
            html, i = _list(lines, i, ordered=bool(_ORDERED.match(line)))
            out.append(html)
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]) and "-" in lines[i + 1]:
            rows = [line, lines[i + 1]]
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(lines[i])
                i += 1
            out.append(_table(rows))
            continue
        if line.startswith("    "):
            code = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                code.append(lines[i][4:])
                i += 1
            while code and not code[-1].strip():
                code.pop()
            out.append(f"<pre><code>{escape(chr(10).join(code))}</code></pre>")
            continue
        paragraph = [line.strip()]
        i += 1
        while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
            paragraph.append(lines[i].strip())
            i += 1
        out.append(f"<p>{render_inline(chr(10).join(paragraph))}</p>")
    return "".join(out)
