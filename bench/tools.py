"""What safety costs per tool call: command spawn with and without bubblewrap, the startup
probe, a policy decision, an audit append and the redaction of an event.

    python bench/tools.py [--runs 50]

Prints medians (milliseconds or microseconds); all offline, in a temporary RODER_HOME.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roder_core.brokers.sandbox import probe_bubblewrap, sandbox_status  # noqa: E402
from roder_core.brokers.secrets import SecretRedactor, redact_data  # noqa: E402
from roder_core.ir import ToolResultItem  # noqa: E402
from roder_core.kernel.tools import ToolCall, ToolExecutionContext  # noqa: E402
from roder_core.policy.audit import AuditLog  # noqa: E402
from roder_core.policy.engine import PolicyEngine  # noqa: E402
from roder_core.policy.rules import RuleSet  # noqa: E402
from roder_core.threads.events import ItemCompleted  # noqa: E402
from tests.tools.harness import make_brokers  # noqa: E402

sys.path.insert(0, str(ROOT / "extensions"))
from roder_ext_builtin_coding_tools.bash import BashTool  # noqa: E402


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms"


def median_us(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1_000_000:.0f} µs"


async def spawn(level: str | None, runs: int, workspace: Path, cache: Path) -> list[float]:
    process = make_brokers(workspace, cache, sandbox=level).process
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await process.run("true")
        samples.append(time.perf_counter() - started)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace, cache = Path(tmp) / "ws", Path(tmp) / "cache"
        workspace.mkdir()
        rows = [("spawn `true`, sandbox off", median_ms(await spawn("off", args.runs, workspace, cache)))]
        if sandbox_status(None).effective == "workspace-write":
            rows.append(
                ("spawn `true`, sandbox workspace-write", median_ms(await spawn("workspace-write", args.runs, workspace, cache)))
            )
        cache_file = Path(tmp) / "probe.json"
        uncached = probe_bubblewrap.__wrapped__  # bypass the per-process memo
        cold, warm = [], []
        for _ in range(10):
            cache_file.unlink(missing_ok=True)
            started = time.perf_counter()
            uncached(None, cache_file)
            cold.append(time.perf_counter() - started)
            started = time.perf_counter()
            uncached(None, cache_file)
            warm.append(time.perf_counter() - started)
        state = "works" if probe_bubblewrap().works else "unavailable"
        rows.append((f"bubblewrap probe, first start after boot ({state})", median_ms(cold)))
        rows.append(("bubblewrap probe, later starts (answer cached on disk)", median_ms(warm)))

        engine = PolicyEngine(rules=RuleSet(allow=["bash(git status*)", "edit(src/**)"], deny=["read(.env)"]))
        ctx = ToolExecutionContext(thread_id="t", turn_id="u", call_id="c", workspace=workspace, mode="ask", brokers=None)  # type: ignore[arg-type]
        bash = BashTool()
        samples = []
        for index in range(args.runs * 20):
            call = ToolCall("c", "bash", {"command": f"git status && npm test > out{index}.log"})
            started = time.perf_counter()
            await engine.evaluate(bash, call, ctx)
            samples.append(time.perf_counter() - started)
        rows.append(("policy decision, compound command with a redirect", median_us(samples)))

        log = AuditLog(Path(tmp) / "audit.jsonl")
        samples = []
        for index in range(args.runs * 20):
            started = time.perf_counter()
            log.record("bench", {"index": index, "command": "git status"})
            samples.append(time.perf_counter() - started)
        rows.append(("audit append (lock, read tail, hash, write)", median_us(samples)))

        redactor = SecretRedactor({"OPENAI_API_KEY": "sk-" + "x" * 40, "GITHUB_TOKEN": "ghp_" + "y" * 36})
        event = ItemCompleted(
            thread_id="t", turn_id="u", item=ToolResultItem(call_id="c", name="bash", text="line of output\n" * 3000)
        )
        samples = []
        for _ in range(args.runs * 4):
            started = time.perf_counter()
            redact_data(event.model_dump(mode="json", by_alias=True), redactor)
            samples.append(time.perf_counter() - started)
        rows.append(("redact one 45 KB tool-result event", median_us(samples)))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    asyncio.run(main())
