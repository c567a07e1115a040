"""The start-up rule for language servers in a folder the user has not trusted (``launch.plan``),
on real files: which servers start, from where, with which environment and TypeScript."""

from __future__ import annotations

import os
from pathlib import Path

from roder_ext_lsp.launch import plan
from roder_ext_lsp.servers import ServerSpec

PYRIGHT = ServerSpec("pyright", "pyright-langserver", ("--stdio",), {".py": "python"}, "built-in")
TYPESCRIPT = ServerSpec("typescript", "typescript-language-server", ("--stdio",), {".ts": "typescript"}, "built-in")


def program(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def typescript_install(root: Path) -> tuple[Path, Path]:
    """A node_modules with typescript-language-server and TypeScript side by side (npm's layout)."""
    server = program(root / "node_modules" / "typescript-language-server" / "lib", "cli.mjs")
    tsserver = root / "node_modules" / "typescript" / "lib" / "tsserver.js"
    tsserver.parent.mkdir(parents=True)
    tsserver.write_text("")
    (root / "node_modules" / ".bin").mkdir()
    (root / "node_modules" / ".bin" / "typescript-language-server").symlink_to(server)
    return root / "node_modules" / ".bin", tsserver


def test_untrusted_only_the_known_servers_start_and_others_say_why(workspace: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    program(bin_dir, "rust-analyzer")
    env = {"PATH": str(bin_dir)}
    for spec in (
        ServerSpec("rust-analyzer", "rust-analyzer", (), {".rs": "rust"}, "built-in"),
        ServerSpec("mine", "rust-analyzer", (), {".rs": "rust"}, "config.toml"),
        ServerSpec("pyright", "rust-analyzer", (), {".py": "python"}, "plugin pyright-lsp"),
    ):
        assert plan(spec, workspace, env, trusted=False) == (
            f"{spec.name} starts only in trusted folders (it can run the project's own code): `roder trust` to allow it"
        )
        assert not isinstance(plan(spec, workspace, env, trusted=True), str)


def test_untrusted_the_program_and_its_interpreters_come_from_outside_the_project(workspace: Path, tmp_path: Path) -> None:
    """PATH entries in the project or relative to it are dropped (a server or python3 there is
    the project's program), as are the variables that make node or python load code."""
    inside = workspace / ".venv" / "bin"
    program(inside, "pyright-langserver")
    env = {"PATH": os.pathsep.join([str(inside), ".", "node_modules/.bin"]), "NODE_OPTIONS": "--require ./x.js", "LANG": "C"}
    assert plan(PYRIGHT, workspace, env, trusted=False) == "pyright is not installed outside this untrusted folder"

    outside = tmp_path / "tools"
    real = program(outside, "pyright-langserver")
    env["PATH"] = os.pathsep.join([str(inside), str(outside), "", "bin", "/usr/bin"])
    env |= {"PYTHONPATH": "src", "PYTHONSTARTUP": "x.py", "NODE_PATH": "node_modules"}
    launch = plan(PYRIGHT, workspace, env, trusted=False)
    assert not isinstance(launch, str)
    assert launch.argv == [str(real), "--stdio"]
    assert launch.env == {"PATH": os.pathsep.join([str(outside), "/usr/bin"]), "LANG": "C"}


def test_untrusted_a_program_linked_into_the_project_is_refused(workspace: Path, tmp_path: Path) -> None:
    target = program(workspace / "tools", "pyright-langserver")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pyright-langserver").symlink_to(target)
    assert plan(PYRIGHT, workspace, {"PATH": str(tmp_path / "bin")}, trusted=False) == (
        "pyright is not installed outside this untrusted folder"
    )


def test_untrusted_typescript_runs_a_typescript_from_outside_with_no_plugins(workspace: Path, tmp_path: Path) -> None:
    """``tsserver.path`` (which typescript-language-server uses before the project's own
    node_modules/typescript) names the TypeScript installed beside the server, a ``tsc`` on PATH
    inside the project is ignored, and the sandbox is told to show that TypeScript."""
    bin_dir, tsserver = typescript_install(tmp_path / "tools")
    program(workspace / "node_modules" / ".bin", "tsc")
    env = {"PATH": os.pathsep.join([str(workspace / "node_modules" / ".bin"), str(bin_dir)])}
    launch = plan(TYPESCRIPT, workspace, env, trusted=False)
    assert not isinstance(launch, str)
    assert launch.initialization_options == {
        "disableAutomaticTypingAcquisition": True,
        "plugins": [],
        "tsserver": {"path": str(tsserver)},
    }
    assert launch.needs == (tsserver.parent.parent,)


def test_untrusted_typescript_without_an_outside_typescript_does_not_start(workspace: Path, tmp_path: Path) -> None:
    server = program(tmp_path / "lone" / "typescript-language-server" / "bin", "typescript-language-server")
    assert plan(TYPESCRIPT, workspace, {"PATH": str(server.parent)}, trusted=False) == (
        "typescript has no TypeScript installed outside this untrusted folder to run"
    )


def test_trusted_typescript_keeps_the_projects_own_typescript_first(workspace: Path, tmp_path: Path) -> None:
    """Trusted, the server may use the project's TypeScript (as editors do); the one on PATH is
    only its fallback, and types are never fetched from the network."""
    bin_dir, tsserver = typescript_install(tmp_path / "tools")
    (bin_dir / "tsc").symlink_to(program(tsserver.parent.parent / "bin", "tsc"))
    launch = plan(TYPESCRIPT, workspace, {"PATH": str(bin_dir)}, trusted=True)
    assert not isinstance(launch, str)
    assert launch.argv == ["typescript-language-server", "--stdio"]
    assert launch.initialization_options == {
        "disableAutomaticTypingAcquisition": True,
        "tsserver": {"fallbackPath": str(tsserver)},
    }
