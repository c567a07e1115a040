"""The app's parts on their own: markdown splitting, delta coalescing, themes, status segments,
palette sources and the key table in docs/app.md."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extensions.roder_ext_tui.palette import PALETTE_SOURCES
from extensions.roder_ext_tui.segments import STATUS_SEGMENTS
from roder_core.brokers import file_glob
from roder_core.kernel.services import StatusView
from roder_tui.coalesce import CpuBudget, DeltaCoalescer
from roder_tui.keymap import KEYS, markdown_table
from roder_tui.remote import LOCAL_STREAM_CPU, SSH_STREAM_CPU, stream_budget, stream_fps, tune_for_link
from roder_tui.theming import ThemeFileError, builtin_theme_dirs, load_themes, parse_theme
from roder_tui.widgets.markdown_stream import FenceSplitter, split_markdown
from roder_tui.widgets.prompt import PromptHistory, match_files, workspace_files
from roder_tui.widgets.status_bar import fit_segments

REPO = Path(__file__).resolve().parents[2]
SAMPLE = (
    "Intro *text*.\n\n```python\ndef f():\n    return '```'\n```\nMiddle\n   ~~~~\nraw ``` here\n~~~~\n"
    "- list\n\n````md\n```inner```\n````\nEnd"
)


def _replay(text: str, cuts: list[int]) -> tuple[str, list[str]]:
    splitter = FenceSplitter(seal_lines=3)
    ops = []
    start = 0
    for cut in sorted(set(cuts)):
        ops += splitter.feed(text[start:cut])
        start = cut
    ops += splitter.feed(text[start:])
    ops += splitter.finish()
    return "".join(o.text for o in ops if o.kind == "prose"), [o.text for o in ops if o.kind == "close"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(SAMPLE)), max_size=40))
def test_fence_splitting_does_not_depend_on_how_text_arrives(cuts: list[int]) -> None:
    assert _replay(SAMPLE, cuts) == _replay(SAMPLE, [])


def test_fences_are_found_and_closed() -> None:
    prose, codes = _replay(SAMPLE, [])
    assert codes == ["def f():\n    return '```'", "raw ``` here", "```inner```"]
    assert "Intro *text*." in prose
    assert "Middle" in prose
    assert "- list" in prose
    assert "End" in prose
    kinds = [s.kind for s in split_markdown(SAMPLE)]
    assert kinds.count("code") == 3
    unterminated = split_markdown("text\n```js\nlet a = 1")
    assert unterminated[-1].kind == "code"
    assert unterminated[-1].text == "let a = 1"
    assert unterminated[-1].lang == "js"


def test_long_prose_is_sealed_at_paragraph_breaks() -> None:
    text = "".join(f"line {i}\n\n" for i in range(20))
    segments = split_markdown(text, seal_lines=6)
    assert len(segments) > 3
    assert all(s.kind == "prose" for s in segments)
    assert "".join(s.text for s in segments) == text


async def test_coalescer_caps_the_repaint_rate_and_keeps_order() -> None:
    batches: list[dict[str, str]] = []
    flushed_at: list[float] = []
    flushed = asyncio.Event()

    async def flush(batch: dict[str, str]) -> None:
        batches.append(batch)
        flushed_at.append(time.monotonic())
        flushed.set()

    coalescer = DeltaCoalescer(flush, fps=20)
    for burst in range(5):
        flushed.clear()
        for i in range(burst * 100, burst * 100 + 100):
            coalescer.push("a", f"{i},")
        async with asyncio.timeout(30):
            await flushed.wait()  # the timer's flush, however late it comes
    await coalescer.drain()
    assert "".join(b.get("a", "") for b in batches) == "".join(f"{i}," for i in range(500))
    assert len(batches) == 5  # one repaint per burst, never one per delta
    # The cap, measured on the flushes themselves: a frame apart at least (a slow machine only
    # spaces them further).
    gaps = [later - earlier for earlier, later in itertools.pairwise(flushed_at)]
    assert all(gap >= coalescer.interval - 0.01 for gap in gaps), gaps
    # Nothing pending: no timer scheduled and no task running, so an idle app wakes for nothing.
    assert coalescer._handle is None
    assert coalescer._task is None or coalescer._task.done()


def test_cpu_budget_counts_the_cpu_of_every_thread_of_the_app() -> None:
    """The budget is the app's CPU, not its event loop's: work on another thread (Textual's
    writer) stretches the interval as the loop's own would."""
    budget = CpuBudget(0.05, fastest=5.0, slowest=1.0)
    now = 100.0
    assert budget.next_interval(0.2, now) == 0.2

    def burn() -> None:  # 0.1 s of CPU on this thread, however long the machine takes for it
        start = time.thread_time()
        while time.thread_time() - start < 0.1:
            sum(range(1000))

    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    # 0.1 s of CPU over 0.2 s of (given) wall time: 50% of a core, ten times the budget.
    assert budget.next_interval(0.2, now + 0.2) > 0.2


def test_cpu_budget_stretches_and_shrinks_the_flush_interval() -> None:
    """Over SSH the flush rate follows what the stream really costs: the thread's CPU between two
    flushes over the wall time between them, against the budget (a fake CPU clock here)."""
    cpu = [0.0]
    budget = CpuBudget(0.05, fastest=5.0, slowest=1.0, cpu_clock=lambda: cpu[0])
    interval, now = 0.2, 100.0
    assert budget.next_interval(interval, now) == 0.2  # the first flush: nothing measured yet
    costly = []
    for _ in range(8):  # 20% of a core used: four times the budget
        now += interval
        cpu[0] += 0.2 * interval
        interval = budget.next_interval(interval, now)
        costly.append(interval)
    assert costly == sorted(costly)
    assert costly[0] == pytest.approx((0.2 + 0.8) / 2)  # halfway to the wanted interval at a time
    assert costly[-1] == 1.0  # never slower than the slowest rate
    for _ in range(8):  # then cheap: 1% of a core
        now += interval
        cpu[0] += 0.01 * interval
        interval = budget.next_interval(interval, now)
    assert interval == pytest.approx(0.2)  # back to the fastest rate, never beyond it
    cpu[0] += 0.05  # a flush forced 10 ms after the last one (a drain) is measured with the next
    assert budget.next_interval(interval, now + 0.01) == interval
    now += interval
    cpu[0] += 0.01 * interval
    assert budget.next_interval(interval, now) > interval  # (0.05 + 0.002) s over 0.2 s: 26% of a core
    now += 10.0  # a pause in the stream (the next turn) is not a measurement
    cpu[0] += 5.0
    assert budget.next_interval(interval, now) == interval


async def test_coalescer_paced_by_a_budget_keeps_every_delta_in_order() -> None:
    batches: list[dict[str, str]] = []
    flushed = asyncio.Event()

    async def flush(batch: dict[str, str]) -> None:
        batches.append(batch)
        flushed.set()

    clock = [0.0]

    def cpu() -> float:  # every flush looks expensive
        clock[0] += 1.0
        return clock[0]

    coalescer = DeltaCoalescer(flush, fps=50, budget=CpuBudget(0.05, fastest=50.0, slowest=20.0, cpu_clock=cpu))
    for burst in range(4):
        flushed.clear()
        for i in range(burst * 10, burst * 10 + 10):
            coalescer.push("a", f"{i},")
        async with asyncio.timeout(30):
            await flushed.wait()
    await coalescer.drain()
    assert "".join(b.get("a", "") for b in batches) == "".join(f"{i}," for i in range(40))
    # Paced between its fastest and slowest rates (how far it got depends on the flushes' spacing,
    # which the deterministic test above pins down).
    assert 1 / 50 <= coalescer.interval <= 1 / 20


def test_themes_load_override_and_report_errors(tmp_path: Path) -> None:
    themes = load_themes(None)
    assert {"roder-dark", "roder-light", "roder-high-contrast", "roder-solarized"} <= set(themes.themes)
    assert not themes.errors
    for folder in builtin_theme_dirs():  # read without the Pygments lookup at start: checked here
        for path in folder.glob("*.toml"):
            parse_theme(path)  # raises ThemeFileError for a code_theme that is not a Pygments style
    user = tmp_path / "themes"
    user.mkdir()
    (user / "mine.toml").write_text('name = "roder-dark"\ncode_theme = "native"\n[colors]\nprimary = "#ff0000"\n')
    (user / "broken.toml").write_text('name = "x"\n[colors]\nprimary = "not-a-colour"\n')
    (user / "bad.toml").write_text("this is = = not toml")
    loaded = load_themes(user)
    assert loaded.themes["roder-dark"].colors["primary"] == "#ff0000"  # a user theme replaces a built-in
    assert len(loaded.errors) == 2
    assert any("not a colour" in e for e in loaded.errors)
    with pytest.raises(ThemeFileError, match="Pygments"):
        bad = user / "style.toml"
        bad.write_text('code_theme = "nope"\n[colors]\nprimary = "#000000"\n')
        parse_theme(bad)
    assert loaded.get("missing").name == "roder-dark"


def test_status_segments_fit_narrow_terminals() -> None:
    state = {
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "mode": "auto-edit",
        "sandbox": "workspace-write",
        "context_tokens": 45_000,
        "context_window": 200_000,
        "cost_usd": 0.42,
        "cwd": "/home/me/project",
        "git_branch": "main",
        "activity": "working",
        "elapsed": 12,
    }
    views = [v for s in STATUS_SEGMENTS if (v := s.render(state)) is not None]
    assert [v.text for v in views][:3] == ["● working 12s", "auto-edit", "anthropic/claude-sonnet-4-5"]
    assert any(v.text == "45.0k/200.0k 22%" for v in views)
    assert any(v.text == "$0.42" for v in views)
    narrow = fit_segments([v for s in STATUS_SEGMENTS if (v := s.render({**state, "narrow": True}))], 46, " ")
    assert [v.text for v in narrow][:3] == ["● working 12s", "auto-edit", "claude-sonnet-4-5"]
    assert sum(len(v.text) for v in narrow) + len(narrow) - 1 <= 46
    kept = fit_segments([StatusView("a" * 10, 1), StatusView("b" * 10, 9), StatusView("c" * 10, 5)], 21, " ")
    assert [v.text[0] for v in kept] == ["b", "c"]  # lowest priority dropped first, order kept


async def test_palette_sources_name_control_plane_methods() -> None:
    state = {
        "thread_id": "thr_1",
        "threads": [{"id": "thr_2", "title": "older", "updated_at": 0}],
        "providers": [{"id": "mock", "name": "Mock", "default_model": "mock", "auth_configured": True}],
        "models": [{"provider": "mock", "id": "mock-large"}],
        "provider": "mock",
        "model": "mock",
        "mode": "ask",
        "themes": ["roder-dark"],
        "theme": "roder-dark",
        "commands": [{"name": "review", "description": "review code", "argument_hint": "[path]"}],
    }
    rows = [row for source in PALETTE_SOURCES for row in await source.commands(state)]
    methods = {row.method for row in rows}
    assert {
        "session/set_mode",
        "providers/select",
        "tui/thread/switch",
        "tui/thread/fork",
        "tui/theme/set",
        "tui/slash",
        "tui/export",
    } <= methods
    assert any(r.title == "/review [path]" for r in rows)
    assert any(r.method == "tui/slash" and r.params == {"name": "compact"} for r in rows)


def test_the_app_page_lists_every_key() -> None:
    page = (REPO / "docs" / "app.md").read_text()
    assert markdown_table() in page, "docs/app.md key table is out of date: paste roder_tui.keymap.markdown_table()"
    assert len(KEYS) > 25


def test_ssh_lowers_the_frame_rate_and_turns_animations_off() -> None:
    env = {"SSH_CONNECTION": "1.2.3.4 22 5.6.7.8 22"}
    assert tune_for_link(env)
    assert env["TEXTUAL_FPS"] == "15"
    assert env["TEXTUAL_ANIMATIONS"] == "none"
    mine = {"SSH_CONNECTION": "x", "TEXTUAL_FPS": "5"}
    tune_for_link(mine)
    assert mine["TEXTUAL_FPS"] == "5"  # the user's setting wins
    local: dict[str, str] = {}
    assert not tune_for_link(local)
    assert "TEXTUAL_FPS" not in local


def test_stream_rate_follows_the_link_and_the_environment(caplog: pytest.LogCaptureFixture) -> None:
    assert stream_fps(True, {}) == 5.0
    assert stream_fps(False, {}) == 30.0
    assert stream_fps(True, {"RODER_STREAM_FPS": "12.5"}) == 12.5
    assert stream_fps(True, {"RODER_STREAM_FPS": "fast"}) == 5.0
    assert stream_fps(False, {"RODER_STREAM_FPS": "0"}) == 30.0
    assert "RODER_STREAM_FPS='fast' is not a number from 1 to 120" in caplog.text
    ssh = stream_budget(True, {})
    assert ssh is not None and ssh.share == SSH_STREAM_CPU
    assert stream_budget(True, {"RODER_STREAM_FPS": "fast"}) is not None  # an invalid rate fixes nothing
    assert stream_budget(True, {"RODER_STREAM_FPS": "5"}) is None  # a rate the user chose is kept
    local = stream_budget(False, {})  # a local terminal: a larger share, at most 30 updates a second
    assert local is not None and local.share == LOCAL_STREAM_CPU and local.shortest == 1 / 30
    assert stream_budget(False, {"RODER_STREAM_FPS": "30"}) is None


def test_prompt_history_persists_and_file_matching(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    history = PromptHistory(path)
    for text in ("one", "two", "two", "three"):
        history.add(text)
    again = PromptHistory(path)
    assert again.entries == ["one", "two", "three"]
    assert again.older() == "three"
    assert again.older() == "two"
    assert again.newer() == "three"
    assert again.newer() == ""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("")
    files = workspace_files(tmp_path)
    assert "src/app.py" in files
    assert not any(f.startswith(".git/") for f in files)
    assert match_files(["docs/app.md", "src/app.py", "tests/test_app.py"], "app")[:2] == ["src/app.py", "docs/app.md"]


@pytest.mark.parametrize("walker", ["ripgrep", "python"])
def test_file_completion_shares_the_tools_walker(tmp_path: Path, walker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if walker == "ripgrep" and shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    if walker == "python":
        monkeypatch.setattr(file_glob, "ripgrep", lambda: None)
    names = ("src/app.py", "src/z/deep.py", "src/secret.key", "node_modules/lib/x.js", ".cache/c.txt", ".github/ci.yml", ".env")
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / ".gitignore").write_text("*.key\n")
    files = workspace_files(tmp_path)
    expected = [".env", ".github/ci.yml", ".gitignore", "src/app.py", "src/z/deep.py"]
    assert files == expected  # in path order, what .gitignore leaves out not offered
    assert workspace_files(tmp_path, limit=2) == files[:2]
