"""``web_fetch {url}``: fetch a page through the network broker, HTML turned into readable text.

It lives in its own extension (``roder-ext-web-fetch``) because it needs the ``network.web``
capability: a profile that denies network access (eval-sandbox, offline) drops this one tool and
keeps the rest of the coding tools.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any
from urllib.parse import urljoin, urlsplit

from pydantic import Field

from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolResult

from .common import BuiltinTool, ToolInputError

MAX_TEXT = 50_000
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
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")


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


class WebFetchArguments(ToolArguments):
    url: NonBlank = Field(description="the http(s) URL to fetch")


class WebFetchTool(BuiltinTool):
    name = "web_fetch"
    description = (
        "Fetch a web page (http or https) and return it as readable text (HTML converted to text with "
        f"links kept). Only hosts on the user's network allowlist can be reached. At most {MAX_TEXT // 1000} KB "
        "of text is returned."
    )
    arguments_model = WebFetchArguments
    kind = "fetch"
    read_only = True

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        host = (urlsplit(str(arguments.get("url", ""))).hostname or "").lower()
        return [PolicySubject(tool=self.name, value=host, kind="domain")]

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        url = parse_arguments(WebFetchArguments, call).url.strip()
        if not urlsplit(url).scheme:
            raise ToolInputError(f"{url!r} is not a URL; include http:// or https://")
        page = await ctx.brokers.network.fetch(url)
        kind = page.content_type.split(";")[0].strip().lower()
        if kind and not kind.startswith(_TEXT_TYPES):
            return ToolResult.error(call, f"{page.url} returned {kind} content, which web_fetch cannot show as text")
        is_html = "html" in kind or (not kind and "<html" in page.text[:1000].lower())
        text = html_to_text(page.text, page.url) if is_html else page.text
        truncated = page.truncated or len(text) > MAX_TEXT
        text = text[:MAX_TEXT]
        header = f"{page.url} (HTTP {page.status})"
        if truncated:
            text += f"\n\n[page truncated at {MAX_TEXT // 1000} KB]"
        return ToolResult(
            id=call.id,
            name=call.name,
            text=f"{header}\n\n{text}",
            is_error=page.status >= 400,
            data={"url": page.url, "status": page.status, "content_type": kind, "truncated": truncated},
        )
