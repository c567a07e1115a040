"""HTML as readable text for ``web_fetch``: block elements become paragraphs, links keep their target.

Apart from the tool so the HTML parser (``html.parser`` and its entity table) loads with the
first page fetched, not with every run that offers the tool.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

_SKIP = frozenset({"script", "style", "noscript", "svg", "template", "iframe", "head"})
_BLOCK = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "header",
        "footer",
        "main",
        "nav",
        "aside",
        "ul",
        "ol",
        "table",
        "tr",
        "blockquote",
        "form",
        "fieldset",
        "dl",
        "dt",
        "dd",
        "figure",
        "figcaption",
        "hr",
    }
)


class _TextExtractor(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.out: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._pre = 0
        self._link: str | None = None
        self._link_text: list[str] = []

    def _trailing_newlines(self) -> tuple[int, bool]:
        """(newlines at the end of the output, whether there is any output)."""
        count = 0
        for chunk in reversed(self.out):
            stripped = chunk.rstrip("\n")
            count += len(chunk) - len(stripped)
            if stripped:
                return count, True
        return count, count > 0

    def _newline(self, count: int = 1) -> None:
        have, any_output = self._trailing_newlines()
        if any_output and have < count:
            self.out.append("\n" * (count - have))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self._skip += 1
            return
        if self._skip:
            return
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._newline(2)
            self.out.append("#" * int(tag[1]) + " ")
        elif tag == "li":
            self._newline()
            self.out.append("- ")
        elif tag == "br":
            self.out.append("\n")
        elif tag == "pre":
            self._newline(2)
            self.out.append("```\n")
            self._pre += 1
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag == "a":
            href = dict(attrs).get("href")
            self._link = urljoin(self.base_url, href) if href and not href.startswith(("#", "javascript:")) else None
            self._link_text = []
        elif tag in _BLOCK:
            self._newline(2 if tag in ("p", "blockquote", "table") else 1)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP:
            self._skip = max(self._skip - 1, 0)
            return
        if self._skip:
            return
        if tag == "pre":
            self._pre = max(self._pre - 1, 0)
            self._newline()
            self.out.append("```")
            self._newline(2)
        elif tag == "a" and self._link is not None:
            label = "".join(self._link_text).strip()
            if label and label != self._link:
                self.out.append(f" ({self._link})")
            self._link = None
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") or tag in _BLOCK:
            self._newline(2 if tag.startswith("h") or tag == "p" else 1)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._skip:
            return
        if not self._pre:
            data = re.sub(r"\s+", " ", data)
            last = next((chunk[-1] for chunk in reversed(self.out) if chunk), "")
            if last in ("", " ", "\n"):
                data = data.lstrip()
        if self._link is not None:
            self._link_text.append(data)
        self.out.append(data)


def html_to_text(html: str, base_url: str = "") -> str:
    parser = _TextExtractor(base_url)
    parser.feed(html)
    parser.close()
    body = re.sub(r"[ \t]+\n", "\n", "".join(parser.out))
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    title = " ".join(parser.title.split())
    return f"# {title}\n\n{body}" if title and not body.startswith(f"# {title}") else body
