"""Images sent in each wire dialect, through the real Runtime, engines and JSONL store, against the
loopback model server: the request body must carry the picture in that dialect's own shape."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from roder_ext_builtin_coding_tools import BuiltinCodingToolsExtension
from roder_ext_jsonl_store import JsonlThreadStoreExtension

from roder_core import ExtensionRegistryBuilder
from roder_core.ir import Attachment, ToolResultItem, UserMessageItem
from roder_core.kernel.extension import CapabilityGrant
from roder_core.media.images import MediaError
from roder_core.providers.extension import ProviderExtension
from roder_core.runtime.runtime import Runtime, RuntimeOptions
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer
from tests.media.images import png_bytes
from tests.providers.helpers import DIALECTS, make_engine

VISION = {"chat-completions": "gpt-4.1", "responses": "gpt-5", "anthropic-messages": "claude-sonnet-4-6"}


def runtime_for(workspace: Path, dialect: str, base_url: str, model: str | None = None) -> Runtime:
    builder = ExtensionRegistryBuilder()
    builder.install(ProviderExtension(make_engine(dialect, base_url)))
    tools = BuiltinCodingToolsExtension()
    builder.install(tools)
    builder.grant_capability(tools.manifest().id, CapabilityGrant("fs.read.workspace"))
    paths = RoderPaths.from_env()
    builder.install(JsonlThreadStoreExtension(paths.threads_dir))
    options = RuntimeOptions(
        cwd=workspace, paths=paths, config=RoderConfig(), mode="bypass", provider="fake", model=model or VISION[dialect]
    )
    return Runtime(builder.build(), options)


def user_images(dialect: str, body: dict[str, Any]) -> list[str]:
    """The base64 images of the user messages of a request, read in the dialect's own shape."""
    found: list[str] = []
    if dialect == "chat-completions":
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for part in message["content"]:
                    if part["type"] == "image_url":
                        url = part["image_url"]["url"]
                        assert url.startswith("data:image/png;base64,")
                        found.append(url.split(",", 1)[1])
    elif dialect == "responses":
        for entry in body["input"]:
            if entry.get("role") == "user":
                for part in entry["content"]:
                    if part["type"] == "input_image":
                        assert part["image_url"].startswith("data:image/png;base64,")
                        found.append(part["image_url"].split(",", 1)[1])
    else:
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block["type"] == "image":
                        assert block["source"]["type"] == "base64" and block["source"]["media_type"] == "image/png"
                        found.append(block["source"]["data"])
    return found


def tool_result_images(dialect: str, body: dict[str, Any]) -> list[str]:
    """Images a tool returned, where each dialect puts them."""
    found: list[str] = []
    if dialect == "chat-completions":  # tool messages carry text only: a user message follows them
        messages = body["messages"]
        for index, message in enumerate(messages):
            if message["role"] == "user" and index > 0 and messages[index - 1]["role"] == "tool":
                found += [p["image_url"]["url"].split(",", 1)[1] for p in message["content"] if p["type"] == "image_url"]
    elif dialect == "responses":
        for entry in body["input"]:
            if entry.get("type") == "function_call_output" and isinstance(entry["output"], list):
                found += [p["image_url"].split(",", 1)[1] for p in entry["output"] if p["type"] == "input_image"]
    else:
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block["type"] == "tool_result":
                    found += [c["source"]["data"] for c in block["content"] if c["type"] == "image"]
    return found


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_an_attached_image_is_sent_in_the_dialects_shape_and_survives_resume(workspace: Path, dialect: str) -> None:
    image = png_bytes(64, 48)
    encoded = base64.b64encode(image).decode("ascii")
    async with FakeModelServer([{"text": "A red square."}, {"text": "Still red."}], dialect=dialect) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        thread = await runtime.start_thread()
        attachment = Attachment(name="shot.png", mime_type="image/png", data_base64=encoded)
        turn = await runtime.run_turn(thread.id, "what is this?", [attachment])
        assert turn.status == "completed", turn.error
        await runtime.close()

        # The thread file holds a reference, never the bytes; the media store holds the bytes.
        stored = (RoderPaths.from_env().threads_dir / f"{thread.id}.jsonl").read_text()
        assert encoded not in stored
        sha = hashlib.sha256(image).hexdigest()
        assert f'"mediaId":"{sha}"' in stored.replace(" ", "")
        media_file = RoderPaths.from_env().media_dir / thread.id / f"{sha}.png"
        assert media_file.read_bytes() == image and media_file.stat().st_mode & 0o777 == 0o600

        resumed = runtime_for(workspace, dialect, server.base_url)
        again = await resumed.resume_thread(thread.id)
        user = next(i for i in again.items() if isinstance(i, UserMessageItem))
        assert [(a.name, a.width, a.height, a.size) for a in user.attachments] == [("shot.png", 64, 48, len(image))]
        assert (await resumed.run_turn(thread.id, "and now?")).status == "completed"
        await resumed.close()
    first, second = server.calls[0].json, server.calls[1].json
    assert user_images(dialect, first) == [encoded]
    assert user_images(dialect, second) == [encoded]  # the resumed thread found its picture


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_the_read_tool_returns_an_image_as_an_attachment(workspace: Path, dialect: str) -> None:
    image = png_bytes(20, 10, color=(0, 0, 255))
    (workspace / "diagram.png").write_bytes(image)
    steps = [{"tool_calls": [{"name": "read", "arguments": {"path": "diagram.png"}}]}, {"text": "A blue bar."}]
    async with FakeModelServer(steps, dialect=dialect) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "look at diagram.png")
        await runtime.close()
    assert turn.status == "completed", turn.error
    result = next(i for i in thread.items() if isinstance(i, ToolResultItem))
    assert not result.is_error and result.attachments[0].media_id == hashlib.sha256(image).hexdigest()
    assert result.attachments[0].data_base64 is None
    listed = runtime.media.list_media(thread.id)
    assert [(m.name, m.source, m.width, m.height) for m in listed] == [("diagram.png", "tool:read", 20, 10)]
    assert tool_result_images(dialect, server.calls[1].json) == [base64.b64encode(image).decode("ascii")]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_model_without_vision_is_refused_before_any_request(workspace: Path, dialect: str) -> None:
    image = base64.b64encode(png_bytes(8, 8)).decode("ascii")
    async with FakeModelServer([{"text": "never"}], dialect=dialect) as server:
        runtime = runtime_for(workspace, dialect, server.base_url, model="deepseek-chat")
        thread = await runtime.start_thread()
        with pytest.raises(MediaError, match=r"deepseek-chat .* does not accept images, so shot.png cannot be sent"):
            await runtime.start_turn(thread.id, "see", [Attachment(name="shot.png", mime_type="image/png", data_base64=image)])
        await runtime.close()
    assert server.calls == []
    assert runtime.media.list_media(thread.id) == []  # nothing was stored for a refused turn


async def test_a_forked_thread_keeps_its_images_after_the_parent_deletes_them(workspace: Path) -> None:
    image = png_bytes(16, 16)
    encoded = base64.b64encode(image).decode("ascii")
    steps = [{"text": "seen"}, {"text": "still seen"}, {"text": "gone"}]
    async with FakeModelServer(steps, dialect="anthropic-messages") as server:
        runtime = runtime_for(workspace, "anthropic-messages", server.base_url)
        parent = await runtime.start_thread()
        await runtime.run_turn(parent.id, "look", [Attachment(name="a.png", mime_type="image/png", data_base64=encoded)])
        child = await runtime.fork_thread(parent.id)
        assert runtime.media.delete(parent.id, hashlib.sha256(image).hexdigest())
        await runtime.run_turn(child.id, "again")
        await runtime.run_turn(parent.id, "and here?")
        await runtime.close()
    assert user_images("anthropic-messages", server.calls[1].json) == [encoded]
    parent_request = json.dumps(server.calls[2].json)
    assert encoded not in parent_request and "a.png (image/png, 16x16) is no longer available: it was deleted" in parent_request


@pytest.mark.parametrize("variant", ["clean", "bad-crc"])
async def test_a_screenshot_from_an_mcp_tool_becomes_a_media_item_the_model_sees(
    workspace: Path, roder_home: Path, variant: str
) -> None:
    """Also a PNG whose optional text chunk has a wrong CRC (which viewers accept): it is used,
    without that chunk, instead of being dropped."""
    import roder_ext_mcp

    from roder_core.kernel.distribution import make_host

    server_script = Path(__file__).with_name("mcp_screenshot_server.py")
    (roder_home / "config.toml").write_text(
        # The server starts in the background; the first model call waits this long for its tools.
        f"[mcp]\nstartup_wait = 25\n[mcp.servers.browser]\n"
        f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server_script))}, {json.dumps(variant)}]\n"
    )
    steps = [{"tool_calls": [{"name": "mcp__browser__screenshot", "arguments": {}}]}, {"text": "An orange page."}]
    async with FakeModelServer(steps, dialect="responses") as server:
        host = make_host(workspace, env=dict(os.environ), trust=False)
        builder = ExtensionRegistryBuilder()
        builder.install(ProviderExtension(make_engine("responses", server.base_url)))
        builder.install(roder_ext_mcp.create(host))
        options = RuntimeOptions(
            cwd=workspace, paths=host.paths, config=host.config, mode="bypass", provider="fake", model="gpt-5", interactive=False
        )
        runtime = Runtime(builder.build(), options)
        try:
            thread = await runtime.start_thread()
            turn = await runtime.run_turn(thread.id, "screenshot the page")
            stored = runtime.media.list_media(thread.id)
        finally:
            await runtime.close()
    assert turn.status == "completed", turn.error
    [shot] = stored
    assert runtime.media.list_media(thread.id) == []  # no thread store: nothing outlives the runtime
    assert (shot.source, shot.mime_type, shot.width, shot.height) == ("tool:mcp__browser__screenshot", "image/png", 32, 24)
    sent = tool_result_images("responses", server.calls[1].json)
    assert [hashlib.sha256(base64.b64decode(s)).hexdigest() for s in sent] == [shot.id]
    assert b"tEXt" not in base64.b64decode(sent[0])
    assert "BytesIO" not in json.dumps(server.calls[1].json)
