"""Files that run code at the user's next ordinary action, through the real loop.

In auto-edit a model wrote ``.venv/lib/python3.11/site-packages/x.pth`` and
``.pre-commit-config.yaml`` without asking; the user's next ``python`` and ``git commit`` ran
them outside the sandbox. The class is defined once (``brokers/next_action.py``); writes to it
ask a person in every mode but bypass, by the file tools, by shell redirects and by commands in
the sandbox, and a headless run refuses them. The model is the loopback model server speaking
the Chat Completions wire format; everything else is the default distribution with real
bubblewrap. CI runs this file as root and as an unprivileged user.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roder_core.ir import ApprovalDecision, ToolResultItem
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.testing.fake_server import FakeModelServer
from roder_core.threads.events import ApprovalRequested
from tests.brokers.helpers import needs_bwrap

SITE = ".venv/lib/python3.11/site-packages"
PAYLOAD = "import os; os.system('touch /tmp/pwned')\n"
#: Written by the file tools: one path of each kind of the class.
TARGETS = [
    f"{SITE}/evil.pth",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    "pkg/sitecustomize.py",
    "tools/.nvim.lua",
    "app.code-workspace",
    ".mise.toml",
    ".yarn/plugins/evil.cjs",
    "myenv/lib/python3.12/site-packages/usercustomize.py",
    # tools that read a file of the folder they start in: rustup (a toolchain `path`), pry, R,
    # irb, vim's exrc, sbt
    "crates/rust-toolchain.toml",
    "src/.pryrc",
    ".Rprofile",
    "lib/.irbrc",
    "_vimrc",
    ".jvmopts",
]
#: What a sandboxed command plants (the same class, through the shell).
PLANT = """\
import os
planted = []
for path in %r:
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        open(path, "w").write("import os")
        planted.append(path)
    except OSError as exc:
        print("refused", path, exc.strerror)
print("planted", len(planted))
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def virtualenv(workspace: Path) -> None:
    """A project virtualenv, and one with an unusual name (recognised by its pyvenv.cfg)."""
    for venv in (".venv", "myenv"):
        (workspace / venv).mkdir()
        (workspace / venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workspace / SITE).mkdir(parents=True)
    (workspace / "myenv/lib/python3.12/site-packages").mkdir(parents=True)


async def run(
    workspace: Path,
    roder_home: Path,
    steps: list[dict[str, Any]],
    *,
    mode: str,
    interactive: bool = False,
    approve: bool = False,
    policy: str = "",
) -> tuple[list[ToolResultItem], list[str]]:
    """One turn; returns the tool results and what the person was asked about."""
    steps = [*steps, {"text": "done"}]
    asked: list[str] = []
    async with FakeModelServer(steps) as server:
        (roder_home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n{policy}'
        )
        runtime = start_runtime(
            StartSettings(
                cwd=workspace,
                provider="local",
                mode=mode,
                interactive=interactive,
                env={"RODER_HOME": str(roder_home), "LOCAL_API_KEY": "sk-local-1", "PATH": "/usr/bin:/bin"},
            )
        ).runtime

        def answer(event: object) -> None:
            if isinstance(event, ApprovalRequested):
                asked.append(event.request.reason)
                decision = "allow_once" if approve else "deny"
                runtime.resolve_approval(event.request.approval_id, ApprovalDecision(decision=decision))

        runtime.bus.add_listener(answer)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "go")
            return [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)], asked
        finally:
            await runtime.close()


async def test_file_tools_ask_in_auto_edit_for_every_kind_of_the_class(workspace: Path, roder_home: Path) -> None:
    virtualenv(workspace)
    steps = [{"tool_calls": [call("write", path=path, content=PAYLOAD)]} for path in TARGETS]
    steps.append({"tool_calls": [call("write", path="src/app.py", content="print('hi')\n")]})
    results, asked = await run(workspace, roder_home, steps, mode="auto-edit", interactive=True)
    assert len(asked) == len(TARGETS), asked
    assert all("next" in reason for reason in asked), asked
    for path in TARGETS:
        assert not (workspace / path).exists(), path
    assert (workspace / "src/app.py").exists()  # ordinary edits stay automatic
    assert not results[-1].is_error


async def test_a_headless_run_refuses_them_and_says_how(workspace: Path, roder_home: Path) -> None:
    virtualenv(workspace)
    steps = [{"tool_calls": [call("write", path=path, content=PAYLOAD)]} for path in TARGETS[:3]]
    steps.append({"tool_calls": [call("bash", command=f"echo 'import os' > {SITE}/redirect.pth")]})
    results, _ = await run(workspace, roder_home, steps, mode="auto-edit")
    for result in results:
        assert result.is_error and "nobody can approve" in result.text, result.text
        assert "--mode bypass" in result.text, result.text
    assert not (workspace / SITE / "evil.pth").exists()
    assert not (workspace / SITE / "redirect.pth").exists()


@needs_bwrap
async def test_a_command_nobody_approved_cannot_plant_them(workspace: Path, roder_home: Path) -> None:
    """Allowed by a rule, so nobody was asked: the sandbox keeps the class read-only or moves
    new members out."""
    virtualenv(workspace)
    (workspace / "plant.py").write_text(PLANT % TARGETS)
    policy = '[policy]\nallow = ["bash(python3 plant.py)"]\n'
    results, asked = await run(
        workspace, roder_home, [{"tool_calls": [call("bash", command="python3 plant.py")]}], mode="auto-edit", policy=policy
    )
    assert asked == []
    text = results[0].text
    assert "refused .venv/lib/python3.11/site-packages/evil.pth" in text, text
    for path in TARGETS:
        assert not (workspace / path).exists(), (path, text)
    assert ".pre-commit-config.yaml -> " in text, text


@needs_bwrap
async def test_a_command_the_person_approved_may_install_into_the_virtualenv(workspace: Path, roder_home: Path) -> None:
    virtualenv(workspace)
    (workspace / "plant.py").write_text(PLANT % [f"{SITE}/installed.pth", ".pre-commit-config.yaml"])
    results, asked = await run(
        workspace,
        roder_home,
        [{"tool_calls": [call("bash", command="python3 plant.py")]}],
        mode="auto-edit",
        interactive=True,
        approve=True,
    )
    assert len(asked) == 1, asked
    assert "planted 2" in results[0].text, results[0].text
    assert (workspace / SITE / "installed.pth").exists()
    assert (workspace / ".pre-commit-config.yaml").exists()


@pytest.mark.parametrize("mode", ["bypass"])
async def test_bypass_writes_them_without_asking(workspace: Path, roder_home: Path, mode: str) -> None:
    virtualenv(workspace)
    steps = [{"tool_calls": [call("write", path=".pre-commit-config.yaml", content="repos: []\n")]}]
    results, asked = await run(workspace, roder_home, steps, mode=mode)
    assert asked == [] and not results[0].is_error, results[0].text
    assert (workspace / ".pre-commit-config.yaml").exists()
