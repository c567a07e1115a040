"""The fixed prefix of every request: the tools' definitions and the system prompt, per dialect.

Every request of a thread starts with the same tools and system prompt, so their size is paid
on every model call (read from the prompt cache at a tenth of the price, but it still fills the
window and the first request of each thread). A one-turn session per dialect through the real
runtime (every built-in extension, as ``roder`` starts them, in a git workspace) against the
loopback fake server; the request body it sends is split into the tools, the system prompt and
the conversation, and each part is counted at four characters a token over its JSON (the same
estimate as bench/prompt_cache.py; providers' tokenizers differ by about 10%).

Usage: python bench/prefix_tokens.py [--mode ask] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CASES = [("anthropic-messages", "claude-sonnet-4-6"), ("responses", "gpt-5.4"), ("chat-completions", "gpt-4.1")]


def tokens(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) // 4


def prefix_parts(body: dict[str, Any], dialect: str) -> tuple[Any, Any]:
    """(tools, system prompt) of a request body, without cache marks."""
    tools = [{k: v for k, v in tool.items() if k != "cache_control"} for tool in body.get("tools", [])]
    if dialect == "anthropic-messages":
        system: Any = [{k: v for k, v in b.items() if k != "cache_control"} for b in body.get("system", [])]
    elif dialect == "responses":
        system = body.get("instructions", "")
    else:
        system = [m for m in body["messages"] if m["role"] in ("system", "developer")]
    return tools, system


async def measure(dialect: str, model: str, mode: str, home: Path) -> dict[str, Any]:
    from roder_core.runtime.bootstrap import StartSettings, start_runtime
    from roder_core.testing.fake_server import FakeModelServer

    workspace = home / f"ws-{dialect}"
    workspace.mkdir()
    (workspace / "app.py").write_text("print('hi')\n")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    async with FakeModelServer([{"text": "ok"}], models=(model,)) as server:
        (home / "config.toml").write_text(
            f'[providers.bench]\ndialect = "{dialect}"\nbase_url = "{server.base_url}"\nmodels = ["{model}"]\n'
        )
        env = {"RODER_HOME": str(home), "PATH": os.environ.get("PATH", ""), "HOME": str(home)}
        settings = StartSettings(cwd=workspace, provider="bench", model=model, mode=mode, interactive=False, trust=False, env=env)
        runtime = start_runtime(settings).runtime
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "hi")
        await runtime.close()
        (home / "config.toml").unlink()
    body = server.calls[0].json
    tools, system = prefix_parts(body, dialect)
    return {
        "dialect": dialect,
        "mode": mode,
        "tools": len(tools),
        "tool_tokens": tokens(tools),
        "system_tokens": tokens(system),
        "prefix_tokens": tokens(tools) + tokens(system),
        "request_tokens": tokens(body),
        "tool_names": [t.get("name") or t.get("function", {}).get("name") for t in tools],
    }


async def main_async(mode: str) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="roder-bench-prefix-") as tmp:
        for dialect, model in CASES:
            rows.append(await measure(dialect, model, mode, Path(tmp)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", default="ask", choices=["plan", "ask", "auto-edit", "bypass"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args.mode))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"mode {args.mode}; tools: {', '.join(rows[0]['tool_names'])}")
    print("| dialect | tools | tool definitions | system prompt | fixed prefix | first request |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['dialect']} | {r['tools']} | {r['tool_tokens']:,} | {r['system_tokens']:,} | "
            f"{r['prefix_tokens']:,} | {r['request_tokens']:,} |"
        )


if __name__ == "__main__":
    main()
