"""Prompt caching: the share of each request's input served from the cacheable prefix.

A 20-turn session per dialect through the real runtime (every built-in extension: context
providers with the git-aware environment block, the real ``read``, ``edit`` and ``write`` tools)
against the loopback fake server (roder_core/testing/fake_server.py). Each turn reads ``app.py``,
edits it, writes a new note (so the workspace's git state differs at every turn), then answers:
four model calls a turn.

The server records the request bodies; this script then replays the provider's caching rule over
them, in request order, and reports per request how much of the input a provider could serve
from its cache:

- breakpoints (Anthropic Messages; Claude behind OpenRouter): a prefix is written at every
  ``cache_control`` breakpoint; a request reads the longest prefix ending at one of its
  breakpoints, or at most 20 blocks before one, that an earlier request wrote (the documented
  lookback);
- automatic (Responses; Chat Completions elsewhere): the longest prefix, in whole items, that an
  earlier request began with, counted only from 1,024 tokens (the documented minimum).

Sizes are estimated at four characters a token over each block's JSON. The goal (issue 13): at
least 90% after the first turn.

``--scenario window``: a session that reaches the context window. The model's window is 32,768
tokens (``--window``); each turn reads three files of about 1,500 tokens each, so automatic
compaction summarizes older turns again and again (the fake server
answers every summary request, whichever form it takes, with a fixed summary). Every request is
counted, the summary requests too.

Usage: python bench/prompt_cache.py [--turns 20] [--scenario session|window] [--window 32768] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (label, dialect, model, extra provider-table keys, caching rule)
CASES: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("anthropic-messages", "anthropic-messages", "claude-sonnet-4-6", {}, "breakpoints"),
    ("responses", "responses", "gpt-5.4", {}, "automatic"),
    (
        "chat-completions (OpenRouter, Claude)",
        "chat-completions",
        "anthropic/claude-sonnet-4.6",
        {"cache_control": True},
        "breakpoints",
    ),
    ("chat-completions (automatic prefix)", "chat-completions", "deepseek-chat", {}, "automatic"),
]
LOOKBACK = 20
#: read app.py, edit it, write a new note (the git state changes every turn), answer.
CALLS_PER_TURN = 4
MIN_AUTOMATIC = 1024


def script(turns: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        steps += [
            {"text": f"Reading app.py for step {turn}.", "tool_calls": [{"name": "read", "arguments": {"path": "app.py"}}]},
            {
                "text": "Bumping the counter.",
                "tool_calls": [
                    {
                        "name": "edit",
                        "arguments": {
                            "path": "app.py",
                            "old_string": f"COUNTER = {turn - 1}\n",
                            "new_string": f"COUNTER = {turn}\n",
                        },
                    }
                ],
            },
            {
                "text": "Noting it.",
                "tool_calls": [
                    {
                        "name": "write",
                        "arguments": {"path": f"step{turn}.md", "content": f"# Step {turn}\n\nThe counter is {turn}.\n"},
                    }
                ],
            },
            {"text": f"Done: the counter is {turn} now, and the tests still pass."},
        ]
    return steps


def canonical(value: Any) -> Any:
    """``value`` without cache marks: they say where to cache, they are not cached content."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def blocks(body: dict[str, Any], dialect: str) -> Iterator[tuple[Any, bool]]:
    """(block, carries a breakpoint) in the order the provider caches a request."""
    for tool in body.get("tools", []):
        yield tool, "cache_control" in tool
    if dialect == "anthropic-messages":
        for block in body.get("system", []):
            yield block, "cache_control" in block
        for message in body["messages"]:
            for index, block in enumerate(message["content"]):
                yield {"role": message["role"], "first": index == 0, **block}, "cache_control" in block
    elif dialect == "responses":
        yield {"instructions": body.get("instructions", "")}, False
        for item in body["input"]:
            yield item, False
    else:
        for message in body["messages"]:
            content = message.get("content")
            marked = isinstance(content, list) and any("cache_control" in p for p in content)
            yield message, marked


def measure(bodies: list[dict[str, Any]], dialect: str, rule: str) -> list[tuple[int, int, int]]:
    """(input tokens, tokens read from the cache, tokens written) per request, in order."""
    written: set[str] = set()
    results = []
    for body in bodies:
        hashes, sizes, marks = [], [], []
        digest = hashlib.sha256()
        total = 0
        for block, marked in blocks(body, dialect):
            text = json.dumps(canonical(block), sort_keys=True, separators=(",", ":"))
            digest.update(text.encode())
            total += max(len(text) // 4, 1)
            hashes.append(digest.copy().hexdigest())
            sizes.append(total)
            marks.append(marked)
        read = 0
        if rule == "breakpoints":
            for point in (i for i, m in enumerate(marks) if m):
                for j in range(point, max(point - LOOKBACK, -1), -1):
                    if hashes[j] in written:
                        read = max(read, sizes[j])
                        break
            last = max((i for i, m in enumerate(marks) if m), default=None)
            wrote = max(sizes[last] - read, 0) if last is not None else 0
            written.update(h for h, m in zip(hashes, marks, strict=True) if m)
        else:
            read = max((sizes[j] for j in range(len(hashes)) if hashes[j] in written), default=0)
            read = read if read >= MIN_AUTOMATIC else 0
            wrote = 0
            written.update(hashes)
        results.append((total, read, wrote))
    return results


async def play(
    base_url: str,
    workspace: Path,
    dialect: str,
    model: str,
    table: dict[str, Any],
    turns: int,
    home: Path,
    prompt: str,
    more_config: str = "",
) -> None:
    """``turns`` turns of one thread through the real runtime, with every built-in extension and
    the provider ``bench`` at ``base_url``; ``prompt`` is formatted with the turn's number."""
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())
    (home / "config.toml").write_text(
        f'[providers.bench]\ndialect = "{dialect}"\nbase_url = "{base_url}"\n'
        f'models = ["{model}"]\nreasoning_effort = "medium"\n{extra}\n{more_config}'
    )
    env = {"RODER_HOME": str(home), "PATH": os.environ.get("PATH", ""), "HOME": str(home)}
    settings = StartSettings(
        cwd=workspace, provider="bench", model=model, mode="bypass", sandbox="off", interactive=False, trust=False, env=env
    )
    runtime = start_runtime(settings).runtime
    thread = await runtime.start_thread()
    for turn in range(1, turns + 1):
        done = await runtime.run_turn(thread.id, prompt.format(turn=turn))
        if done.status != "completed":
            raise SystemExit(f"{dialect}: turn {turn} {done.status}: {done.error}")
    await runtime.close()
    (home / "config.toml").unlink()


async def run_case(number: int, dialect: str, model: str, table: dict[str, Any], turns: int, home: Path) -> list[dict[str, Any]]:
    from roder_core.testing.fake_server import FakeModelServer

    workspace = home / f"ws-{number}"
    workspace.mkdir()
    (workspace / "app.py").write_text("COUNTER = 0\n\n\ndef main() -> int:\n    return COUNTER\n")
    (workspace / "README.md").write_text("# A small app\n\nRun `python app.py`.\n")
    git = ["git", "-C", str(workspace), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    async with FakeModelServer(script(turns), models=(model,)) as server:
        await play(server.base_url, workspace, dialect, model, table, turns, home, "Step {turn}: bump the counter in app.py.")
    if "COUNTER = 20" not in (workspace / "app.py").read_text() and turns == 20:
        raise SystemExit(f"{dialect}: the edits did not happen")
    return [call.json for call in server.calls]


WINDOW = 32_768
WINDOW_READS = 3
#: Both summary request forms ask for a "handoff"; no other request of the scenario says it.
SUMMARY_MARK = "handoff"
SUMMARY = "## Goal\nRead the files\n## Constraints\nnone\n## Progress\nreading\n## Decisions\nnone\n## Next steps\nread on"


def window_script(turns: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        for read in range(WINDOW_READS):
            path = f"data/f{turn}-{read}.txt"
            call = {"name": "read", "arguments": {"path": path}}
            steps.append({"text": f"Reading {path}.", "tool_calls": [call], "unless": SUMMARY_MARK})
        steps.append({"text": f"Turn {turn}: read {WINDOW_READS} files.", "unless": SUMMARY_MARK})
    steps += [{"text": SUMMARY, "when": SUMMARY_MARK} for _ in range(turns)]
    return steps


async def run_window_case(
    number: int, dialect: str, model: str, table: dict[str, Any], turns: int, home: Path, window: int = WINDOW
) -> list[dict[str, Any]]:
    from roder_core.testing.fake_server import FakeModelServer

    workspace = home / f"win-{number}"
    (workspace / "data").mkdir(parents=True)
    for turn in range(1, turns + 1):
        for read in range(WINDOW_READS):
            lines = [f"file {turn}-{read} line {n}: " + "lorem ipsum dolor sit amet " * 2 for n in range(80)]
            (workspace / "data" / f"f{turn}-{read}.txt").write_text("\n".join(lines) + "\n")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    async with FakeModelServer(window_script(turns), models=(model,)) as server:
        models = f'[models."{model}"]\ncontext_window = {window}\n'
        await play(server.base_url, workspace, dialect, model, table, turns, home, "Turn {turn}: read the next files.", models)
    return [call.json for call in server.calls]


def summarize(label: str, rule: str, bodies: list[dict[str, Any]], dialect: str) -> dict[str, Any]:
    rows = measure(bodies, dialect, rule)
    shares = [read / total for total, read, _ in rows]
    later = shares[CALLS_PER_TURN:]
    return {
        "case": label,
        "rule": rule,
        "requests": len(rows),
        "first_request_tokens": rows[0][0],
        "last_request_tokens": rows[-1][0],
        "min_after_first_turn": min(later),
        "median_after_first_turn": statistics.median(later),
        "token_weighted_after_first_turn": sum(r for _, r, _ in rows[CALLS_PER_TURN:])
        / sum(t for t, _, _ in rows[CALLS_PER_TURN:]),
        "written_tokens": sum(w for _, _, w in rows),
        "breaks": sum(1 for share in later if share < 0.5),
        "summary_requests": sum(1 for body in bodies if SUMMARY_MARK in json.dumps(body)),
        "shares": [round(s, 4) for s in shares],
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    summaries = []
    with tempfile.TemporaryDirectory(prefix="roder-bench-cache-") as tmp:
        for number, (label, dialect, model, table, rule) in enumerate(CASES):
            if args.scenario == "window":
                bodies = await run_window_case(number, dialect, model, table, args.turns, Path(tmp), args.window)
            else:
                bodies = await run_case(number, dialect, model, table, args.turns, Path(tmp))
            summaries.append(summarize(label, rule, bodies, dialect))
    return summaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--scenario", choices=["session", "window"], default="session")
    parser.add_argument("--window", type=int, default=WINDOW, help="the model's context window (--scenario window)")
    parser.add_argument("--json", action="store_true", help="print the per-request shares too, as JSON")
    args = parser.parse_args()
    summaries = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(summaries, indent=2))
        return
    print(
        "| case | rule | requests (summaries) | prompt tokens (first -> last) | min after turn 1 | median | "
        "token-weighted | requests under 50% | tokens written |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in summaries:
        print(
            f"| {s['case']} | {s['rule']} | {s['requests']} ({s['summary_requests']}) | {s['first_request_tokens']:,} -> "
            f"{s['last_request_tokens']:,} | {s['min_after_first_turn']:.1%} | {s['median_after_first_turn']:.1%} | "
            f"{s['token_weighted_after_first_turn']:.1%} | {s['breaks']} | {s['written_tokens']:,} |"
        )


if __name__ == "__main__":
    main()
