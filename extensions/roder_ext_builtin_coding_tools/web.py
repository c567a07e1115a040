"""``web_fetch {url}``: fetch a page through the network broker, HTML turned into readable text.

It lives in its own extension (``roder-ext-web-fetch``) because it needs the ``network.web``
capability: a profile that denies network access (eval-sandbox, offline) drops this one tool and
keeps the rest of the coding tools.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolResult

from .common import BuiltinTool, ToolInputError

MAX_TEXT = 50_000
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")


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
        if is_html:
            from .html_text import html_to_text  # the HTML parser loads with the first page

            text = html_to_text(page.text, page.url)
        else:
            text = page.text
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
