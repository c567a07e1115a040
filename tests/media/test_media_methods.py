"""The five media methods of seed 004 over a real `roder app-server`: newline-delimited JSON-RPC on
stdio pipes, and the authenticated WebSocket transport. The client is written from seed 004's
"Implementing a client" steps: initialize, create a thread, submit work, render notifications."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.media.images import png_bytes
from tests.server.support import PipePeer, RemoteServer, RpcPeer, WsPeer, call, trusted_workspace

pytestmark = pytest.mark.e2e
TOKEN = "media-token-0123456789"
SCREENSHOT = png_bytes(40, 30, color=(0, 128, 0))

#: A project extension whose tool returns a screenshot, as a browser MCP server would.
SCREENSHOT_EXTENSION = f"""
from roder_core import (EXTENSION_API_VERSION, ExtensionManifest, ProvidedService, RoderExtension, Tool,
                        ToolResult)
from roder_core.ir import Attachment

PNG = {base64.b64encode(SCREENSHOT).decode("ascii")!r}


class Screenshot(Tool):
    name = "screenshot"
    description = "Take a screenshot of the page."
    parameters = {{"type": "object", "properties": {{}}}}
    kind = "read"
    read_only = True

    async def execute(self, ctx, call):
        shot = Attachment(name="page.png", mime_type="image/png", data_base64=PNG)
        return ToolResult(id=call.id, name=call.name, text="[screenshot attached]", attachments=[shot])


class Tools:
    def id(self):
        return "shots"

    def contribute(self, registry):
        registry.register(Screenshot())


class Shots(RoderExtension):
    def manifest(self):
        return ExtensionManifest(id="shots", name="Shots", version="0.1.0", api_version=EXTENSION_API_VERSION,
                                 description="a screenshot tool", provides=[ProvidedService.ToolProvider("shots")])

    def install(self, registry):
        registry.tool_contributor(Tools())


def create(host):
    return Shots()
"""


def workspace_with_screenshots(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    steps = [{"text": "Two pictures; let me take a third.", "tool_calls": [call("screenshot")]}, {"text": "All green."}]
    workspace, env = trusted_workspace(tmp_path, steps)
    (workspace / ".roder" / "extensions" / "shots.py").write_text(SCREENSHOT_EXTENSION)
    return workspace, env


@pytest.fixture(params=["stdio", "websocket"])
async def peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[RpcPeer, Path]]:
    workspace, env = workspace_with_screenshots(tmp_path)
    if request.param == "stdio":
        pipe = await PipePeer.start(workspace, env)
        yield pipe, workspace
        code, stderr = await pipe.close()
        assert code == 0, stderr
    else:
        env["RODER_TEST_TOKEN"] = TOKEN
        server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false")
        socket = await WsPeer.connect(server.url, TOKEN)
        yield socket, workspace
        await socket.close()
        await server.stop()


def error_of(response: dict[str, Any]) -> tuple[int, str]:
    return response["error"]["code"], response["error"]["message"]


async def test_media_methods_end_to_end(peer: tuple[RpcPeer, Path]) -> None:
    client, workspace = peer
    info = await client.call("initialize", {"clientInfo": {"name": "media-test"}})
    media_group = next(g for g in info["methodGroups"] if g["name"] == "media")
    assert media_group["available"] is True
    assert media_group["methods"] == ["media/attachToTurn", "media/delete", "media/list", "media/read", "media/thumbnail"]

    thread = (await client.call("thread/start", {"cwd": str(workspace)}))["thread"]
    photo = png_bytes(300, 200)
    (workspace / "photo.png").write_bytes(photo)
    by_path = await client.call("media/attachToTurn", {"threadId": thread["id"], "path": str(workspace / "photo.png")})
    assert by_path["media"]["id"] == hashlib.sha256(photo).hexdigest()
    assert by_path["media"] | {"createdAt": 0} == {
        "id": hashlib.sha256(photo).hexdigest(),
        "threadId": thread["id"],
        "name": "photo.png",
        "mimeType": "image/png",
        "kind": "image",
        "size": len(photo),
        "width": 300,
        "height": 200,
        "source": "user",
        "createdAt": 0,
        "pending": True,
    }
    assert by_path["input"] == {"type": "image", "name": "photo.png", "mediaId": by_path["media"]["id"]}
    added = await client.next_notification("media/artifactAdded", threadId=thread["id"])
    assert added["media"]["id"] == by_path["media"]["id"]

    pasted = png_bytes(10, 10, color=(0, 0, 255), fmt="BMP")  # a clipboard's BMP is stored as PNG
    by_data = await client.call(
        "media/attachToTurn",
        {"threadId": thread["id"], "dataBase64": base64.b64encode(pasted).decode(), "name": "clip", "source": "clipboard"},
    )
    assert by_data["media"]["mimeType"] == "image/png" and by_data["media"]["source"] == "clipboard"
    listed = (await client.call("media/list", {"threadId": thread["id"]}))["media"]
    assert [(m["name"], m["pending"]) for m in listed] == [("photo.png", True), ("clip", True)]

    # turn/start takes the pending images; the mock model answers with a tool screenshot.
    turn = (await client.call("turn/start", {"threadId": thread["id"], "prompt": "what are these?"}))["turn"]
    shot = await client.next_notification("media/artifactAdded", threadId=thread["id"], turnId=turn["id"])
    assert shot["media"]["source"] == "tool:screenshot" and (shot["media"]["width"], shot["media"]["height"]) == (40, 30)
    done = await client.next_notification("turn/completed", threadId=thread["id"])
    assert done["turn"]["status"] == "completed"
    listed = (await client.call("media/list", {"threadId": thread["id"]}))["media"]
    assert [(m["source"], m["pending"]) for m in listed] == [("user", False), ("clipboard", False), ("tool:screenshot", False)]
    assert (await client.call("media/list", {"threadId": thread["id"], "kind": "audio"}))["media"] == []

    read = (await client.call("thread/read", {"threadId": thread["id"], "includeTurns": True}))["thread"]
    items = read["turns"][0]["items"]
    user = next(i for i in items if i["type"] == "userMessage")
    assert [a["mediaId"] for a in user["attachments"]] == [by_path["media"]["id"], by_data["media"]["id"]]
    assert all("dataBase64" not in a for a in user["attachments"])
    result = next(i for i in items if i["type"] == "toolResult")
    assert result["attachments"][0]["mediaId"] == hashlib.sha256(SCREENSHOT).hexdigest()

    got = await client.call("media/read", {"threadId": thread["id"], "mediaId": by_path["media"]["id"]})
    assert base64.b64decode(got["dataBase64"]) == photo and got["media"]["name"] == "photo.png"
    too_big = await client.request("media/read", {"threadId": thread["id"], "mediaId": by_path["media"]["id"], "maxBytes": 10})
    assert error_of(too_big) == (-32602, f"media item {by_path['media']['id']} is {len(photo)} bytes, more than maxBytes (10)")

    thumb = await client.call("media/thumbnail", {"threadId": thread["id"], "mediaId": by_path["media"]["id"], "size": 60})
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(thumb["dataBase64"]))) as preview:
        assert preview.format == "PNG" and preview.size == (60, 40) == (thumb["width"], thumb["height"])

    deleted = await client.call("media/delete", {"threadId": thread["id"], "mediaId": by_path["media"]["id"]})
    assert deleted == {"deleted": True}
    gone = await client.next_notification("media/artifactDeleted", threadId=thread["id"])
    assert gone["mediaId"] == by_path["media"]["id"]
    assert (await client.call("media/delete", {"threadId": thread["id"], "mediaId": by_path["media"]["id"]})) == {
        "deleted": False
    }
    missing = await client.request("media/read", {"threadId": thread["id"], "mediaId": by_path["media"]["id"]})
    assert error_of(missing) == (-32602, f"thread {thread['id']} has no media item {by_path['media']['id']}")


async def test_bad_media_requests_get_clear_errors(peer: tuple[RpcPeer, Path]) -> None:
    client, workspace = peer
    await client.call("initialize")
    thread = (await client.call("thread/start", {"cwd": str(workspace)}))["thread"]
    bad_id = await client.request("media/read", {"threadId": thread["id"], "mediaId": "../../etc/passwd"})
    assert error_of(bad_id) == (-32602, "'../../etc/passwd' is not a media id (64 lowercase hex digits, the item's SHA-256)")
    not_image = await client.request(
        "media/attachToTurn", {"threadId": thread["id"], "dataBase64": base64.b64encode(b"hello").decode(), "name": "notes.txt"}
    )
    code, message = error_of(not_image)
    assert code == -32602 and message.startswith("notes.txt is not an image Roder can read")
    two_sources = await client.request(
        "media/attachToTurn", {"threadId": thread["id"], "dataBase64": "aGk=", "path": str(workspace / "x.png")}
    )
    assert error_of(two_sources) == (-32602, "media/attachToTurn takes exactly one of mediaId, path and dataBase64")
    relative = await client.request("media/attachToTurn", {"threadId": thread["id"], "path": "x.png"})
    assert error_of(relative) == (-32602, "path must be an absolute path (got 'x.png')")
    outside = await client.request("media/attachToTurn", {"threadId": thread["id"], "path": "/etc/hostname"})
    assert error_of(outside)[0] == -32004  # the workspace's file broker refuses a path outside it
    unknown = await client.request("media/list", {"threadId": "thr_nope"})
    assert error_of(unknown)[0] == -32602
    thumb_of_nothing = await client.request("media/thumbnail", {"threadId": thread["id"], "mediaId": "a" * 64})
    assert error_of(thumb_of_nothing) == (-32602, f"thread {thread['id']} has no media item {'a' * 64}")
    assert (await client.call("media/list", {"threadId": thread["id"]}))["media"] == []
    # Still usable after every refusal.
    assert json.dumps((await client.call("session/get"))["mode"])
