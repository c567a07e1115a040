"""Roder's own git runs unconfined (its environment block every turn, batch baselines, plugin
fetches), so it must never be a program named ``git`` that the agent's commands left in a
workspace folder on Roder's PATH (direnv's ``PATH_add bin`` or ``layout python``,
``./node_modules/.bin``, ``.``), whatever the PATH's order."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from roder_ext_context.environment import git_state

from roder_core.batch.workspace import Baseline
from roder_core.brokers.host_programs import SYSTEM_FOLDERS, system_program
from roder_core.brokers.safe_git import host_git


def plant_git(workspace: Path, marker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``git`` in ``workspace/bin`` that leaves ``marker`` and then behaves, first on the PATH
    (relative and absolute), with the workspace as the working folder."""
    real = shutil.which("git")
    assert real is not None
    planted = workspace / "bin" / "git"
    planted.parent.mkdir()
    planted.write_text(f'#!/bin/sh\ntouch {marker}\nexec {real} "$@"\n')
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    monkeypatch.chdir(workspace)


def test_roders_git_is_the_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    plant_git(workspace, tmp_path / "escaped", monkeypatch)
    found = host_git()
    assert found is not None and os.path.dirname(found) in SYSTEM_FOLDERS


async def test_the_environment_block_never_runs_a_planted_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(workspace)], check=True)
    marker = tmp_path / "escaped"
    plant_git(workspace, marker, monkeypatch)
    state = await git_state(workspace)
    assert "trunk" in state, state
    assert not marker.exists()


def test_a_batch_baseline_never_runs_a_planted_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("x = 1\n")
    marker = tmp_path / "escaped"
    plant_git(workspace, marker, monkeypatch)
    baseline = Baseline(tmp_path / "baseline.git", workspace)
    baseline.record()
    (workspace / "calc.py").write_text("x = 2\n")
    diff, changes = baseline.compare()
    assert changes == [("M", "calc.py")] and "+x = 2" in diff
    assert not marker.exists()


async def test_glob_never_runs_an_rg_a_sandboxed_command_planted(
    workspace: Path, roder_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file listing behind ``glob`` (and ``@file`` completion) runs ``rg`` on the host: a
    sandboxed command writes ``bin/rg`` into the workspace, whose ``bin`` is on the PATH
    (relative and absolute), and the auto-approved ``glob`` that follows must not run it."""
    from tests.security.test_attack_git_include import _call, turn_and_requests

    marker = tmp_path / "escaped"
    real = shutil.which("rg")
    if real is None:
        pytest.skip("ripgrep is not installed")
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    monkeypatch.chdir(workspace)
    (workspace / "a.py").write_text("x = 1\n")
    plant = f"mkdir -p bin && printf '#!/bin/sh\\ntouch {marker}\\nexec {real} \"$@\"\\n' > bin/rg && chmod +x bin/rg"
    results, _requests = await turn_and_requests(
        workspace, roder_home, [_call("bash", command=plant), _call("glob", pattern="**/*.py")], "bypass"
    )
    assert [r.is_error for r in results] == [False, False], [r.text for r in results]
    assert (workspace / "bin" / "rg").exists(), results[0].text
    assert "a.py" in results[1].text, results[1].text
    assert not marker.exists()


def test_a_program_only_the_working_folder_has_is_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the system's folders lack a program, the PATH is searched without its relative
    folders and the folders inside the working folder: the one outside is found, never the
    planted one, and with only the planted one there is none."""
    workspace, elsewhere = tmp_path / "ws", tmp_path / "tools"
    for folder in (workspace / "bin", workspace / "node_modules" / ".bin", elsewhere):
        folder.mkdir(parents=True)
        program = folder / "roder-probe-tool"
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    monkeypatch.chdir(workspace)
    inside = f"bin:.:{workspace / 'bin'}:{workspace / 'node_modules' / '.bin'}"
    monkeypatch.setenv("PATH", f"{inside}:{elsewhere}")
    assert system_program("roder-probe-tool") == str(elsewhere / "roder-probe-tool")
    monkeypatch.setenv("PATH", inside)
    assert system_program("roder-probe-tool") is None


def _fake_browser(folder: Path, name: str, log: Path) -> None:
    """A ``name`` in ``folder`` that writes its arguments and environment to ``log``."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text(f'#!/bin/sh\n{{ echo "$@"; env; }} > {log}.part\nmv {log}.part {log}\n')
    program.chmod(0o755)


@pytest.fixture
def browsers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A workspace whose ``bin`` (first on the PATH, relative and absolute) holds a fake
    ``xdg-open``, and a stand-in system folder holding another; the working folder is the
    workspace, on a desktop, with a secret in the environment. Returns the workspace and the
    logs the two fakes write."""
    import roder_core.brokers.host_programs as host_programs

    workspace, system = tmp_path / "ws", tmp_path / "system"
    planted_log, system_log = tmp_path / "planted.log", tmp_path / "system.log"
    _fake_browser(workspace / "bin", "xdg-open", planted_log)
    _fake_browser(system, "xdg-open", system_log)
    monkeypatch.setattr(host_programs, "SYSTEM_FOLDERS", (str(system),))
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("BROWSER", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-browser-must-not-see-this")
    monkeypatch.chdir(workspace)
    return workspace, planted_log, system_log


def test_a_sign_in_opens_the_systems_browser_never_one_planted_in_the_workspace(
    tmp_path: Path, browsers: tuple[Path, Path, Path]
) -> None:
    """The sign-in's browser (the login service's default opener) is the system folder's
    ``xdg-open``; the one a sandboxed command left in the workspace's ``bin`` never runs."""
    from roder_core.auth.logins import LoginService
    from roder_core.settings.credentials import CredentialStore
    from tests.builders import wait_until

    _, planted_log, system_log = browsers
    address = "http://127.0.0.1:9/authorize?state=abc"
    assert LoginService({}, CredentialStore(tmp_path / "credentials.json")).open_browser(address)
    wait_until(system_log.exists, "the system's browser")  # written whole (a rename)
    said = system_log.read_text()
    assert said.splitlines()[0] == address
    assert "sk-browser-must-not-see-this" not in said  # the browser gets no secrets
    assert not planted_log.exists()


def test_with_only_a_planted_browser_none_is_opened(browsers: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: no browser but the workspace's means none (the address is printed instead)."""
    import roder_core.brokers.host_programs as host_programs
    from roder_core.brokers import browser

    workspace, planted_log, _ = browsers
    monkeypatch.setattr(host_programs, "SYSTEM_FOLDERS", (str(workspace / "empty"),))
    monkeypatch.setenv("PATH", f"bin:{workspace / 'bin'}")
    assert browser.browser_argv("http://127.0.0.1:9/") is None
    assert not browser.open_in_browser("http://127.0.0.1:9/")
    assert not planted_log.exists()


@pytest.mark.parametrize("chosen", ["bin/xdg-open", "./bin/xdg-open %s", "{workspace}/bin/xdg-open"])
def test_a_browser_variable_naming_a_workspace_program_is_not_followed(
    chosen: str, browsers: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$BROWSER`` (which a workspace's ``.envrc`` could set too) naming a program inside the
    working folder is skipped; the system's opener is used."""
    from roder_core.brokers.browser import browser_argv

    workspace, _, _ = browsers
    monkeypatch.setenv("BROWSER", chosen.format(workspace=workspace))
    argv = browser_argv("http://127.0.0.1:9/")
    assert argv == [str(workspace.parent / "system" / "xdg-open"), "http://127.0.0.1:9/"]


def test_a_browser_variable_naming_a_system_program_is_followed(
    browsers: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from roder_core.brokers.browser import browser_argv

    workspace, _, _ = browsers
    _fake_browser(workspace.parent / "system", "my-browser", workspace.parent / "mine.log")
    monkeypatch.setenv("BROWSER", "my-browser --new-tab=%s")
    assert browser_argv("http://127.0.0.1:9/") == [
        str(workspace.parent / "system" / "my-browser"),
        "--new-tab=http://127.0.0.1:9/",
    ]


@pytest.mark.parametrize(
    "address",
    [
        "--renderer-cmd-prefix=touch /tmp/pwned",  # a browser's option, not an address
        "-new-tab",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "https://",  # no host
        "http://127.0.0.1:9/\n--incognito",
        " https://example.org/",
    ],
)
def test_only_a_web_address_is_handed_to_a_browser(address: str, browsers: tuple[Path, Path, Path]) -> None:
    """Whatever a caller passes (an address built from a server's metadata, one day one that was
    not checked), the browser gets nothing but an http(s) address with a host: a string that
    starts with ``-`` would be one of its options (Chromium's ``--renderer-cmd-prefix`` runs a
    program), and ``file:`` or ``javascript:`` addresses are not sign-in pages."""
    from roder_core.brokers.browser import browser_argv, open_in_browser

    _, _, system_log = browsers
    assert browser_argv(address) is None
    assert not open_in_browser(address)
    assert not system_log.exists()
