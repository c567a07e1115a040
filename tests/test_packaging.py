"""A release built the usual way works: ``python -m build`` and ``uv build`` make the sdist and then
the wheel from that sdist, and the wheel, installed into a clean venv outside the checkout, runs
``roder --version`` and ``roder -p`` (the mock model, then a real engine against the loopback
fake server the wheel ships).

No index is contacted: the builds run without isolation (hatchling comes from the test extra), the
wheel is installed with ``--no-deps --no-index``, and the venv borrows the test environment's
third-party packages through a folder of links that leaves out Roder's own editable install, so
only the wheel can provide ``roder_core``, ``roder_tui``, the extensions and the themes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import roder_core

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
#: What a wheel must hold besides metadata: the packages, every built-in extension and the themes.
PACKAGES = ("roder_core/", "roder_tui/", "roder_ext_mock/", "roder_ext_builtin_coding_tools/", "roder_tui/themes/")


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done


def _build_with(front_end: str, out: Path) -> None:
    if front_end == "build":
        _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)])
    else:
        uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
        assert uv is not None, "uv is part of the test extra (pip install -e '.[test]')"
        env = {**os.environ, "UV_OFFLINE": "1", "UV_NO_CACHE": "1"}
        _run([uv, "build", "--no-build-isolation", "--python", sys.executable, "--out-dir", str(out), str(ROOT)], env=env)


@pytest.fixture(scope="module", params=["build", "uv"])
def dist(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(sdist, wheel) made by one front end; both make the wheel from the sdist."""
    out = tmp_path_factory.mktemp(f"dist-{request.param}")
    _build_with(request.param, out)
    [sdist] = out.glob("roder-*.tar.gz")
    [wheel] = out.glob("roder-*.whl")
    yield sdist, wheel


def test_the_sdist_holds_the_real_packages(dist: tuple[Path, Path]) -> None:
    sdist, _ = dist
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert "roder_core/__init__.py" in names
    assert "roder_tui/cli.py" in names
    assert "extensions/roder_ext_mock/__init__.py" in names
    assert any(name.startswith("themes/") for name in names)
    assert not any(name.startswith("devpath/") for name in names)  # the editable install's links stay home


def test_the_sdist_holds_every_tracked_file(dist: tuple[Path, Path]) -> None:
    """A packager builds and tests from the sdist alone: every file the repository tracks (or would,
    once added) is in it, the extension SDKs the tests run too, except the editable install's
    links; and nothing git ignores (installed node modules, build output) comes along."""
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout (an unpacked sdist): there is no list of tracked files to compare")
    sdist, _ = dist
    tracked = set(_run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout.splitlines())
    expected = {name for name in tracked if not name.startswith("devpath/")}
    with tarfile.open(sdist) as archive:
        names = {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile()}
    assert sorted(expected - names) == []
    assert sorted(names - expected - {"PKG-INFO"}) == []


def test_the_wheel_built_from_the_sdist_holds_packages_extensions_and_themes(dist: tuple[Path, Path]) -> None:
    _, wheel = dist
    assert wheel.name == f"roder-{roder_core.__version__}-py3-none-any.whl"  # the version comes from roder_core
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"roder-{roder_core.__version__}.dist-info/METADATA").decode()
        entry_points = archive.read(f"roder-{roder_core.__version__}.dist-info/entry_points.txt").decode()
    for prefix in PACKAGES:
        assert any(name.startswith(prefix) for name in names), prefix
    packages = {name.split("/")[0] for name in names if name.endswith("/__init__.py") and name.count("/") == 1}
    assert {"roder_core", "roder_tui", "roder_ext_mock"} <= packages
    # PEP 561: every package is typed (mypy --strict checks them all), so code that imports one
    # (an extension importing roder_ext_tui's segments, a test) is checked against its hints
    assert {package for package in packages if f"{package}/py.typed" not in names} == set()
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata
    assert "Project-URL: Documentation," in metadata
    assert "roder = roder_tui.cli:run" in entry_points
    # Files beside the code (the web page, themes, the score witness, py.typed): every one git has
    # in the packages reaches the wheel, where the code looks for it.
    tracked = _run(["git", "ls-files", "roder_core", "roder_tui", "extensions", "themes"], cwd=ROOT).stdout.splitlines()
    for name in tracked:
        if not name.startswith(("extensions/", "themes/")):
            assert name in names, name
        elif name.startswith("themes/"):
            assert f"roder_tui/{name}" in names, name
        else:
            assert name.removeprefix("extensions/") in names, name


def test_the_metadata_says_what_a_packager_needs(dist: tuple[Path, Path]) -> None:
    """License, readme, Python, links, classifiers, and dependencies each with a lower bound."""
    from email.parser import Parser

    _, wheel = dist
    with zipfile.ZipFile(wheel) as archive:
        meta = Parser().parsestr(archive.read(f"roder-{roder_core.__version__}.dist-info/METADATA").decode())
        names = archive.namelist()
    assert meta["License-Expression"] == "MIT"
    assert f"roder-{roder_core.__version__}.dist-info/licenses/LICENSE" in names
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().startswith("# Roder")
    assert {url.split(",")[0] for url in meta.get_all("Project-URL")} >= {"Homepage", "Documentation", "Source", "Issues"}
    assert "License :: OSI Approved :: MIT License" not in meta.get_all("Classifier")  # the expression says it (PEP 639)
    runtime = [dep for dep in meta.get_all("Requires-Dist") if "extra ==" not in dep]
    assert runtime
    assert [dep for dep in runtime if ">=" not in dep] == []  # each names the oldest release it works with


def _borrowed_site_packages(into: Path) -> Path:
    """Links to this environment's third-party packages, without Roder's own editable install."""
    into.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        if entry.name.startswith(("roder", "_roder", "__editable__", "_editable_impl_roder")) or entry.suffix == ".pth":
            continue
        (into / entry.name).symlink_to(entry)
    return into


@pytest.fixture(scope="module")
def installed(dist: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (outside the checkout) with the wheel installed; returns its bin folder."""
    _, wheel = dist
    root = tmp_path_factory.mktemp("clean")
    venv.create(root / "venv", with_pip=True, symlinks=True)
    python = root / "venv" / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (purelib / "borrowed-dependencies.pth").write_text(f"{_borrowed_site_packages(root / 'deps')}\n")
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)])
    return root / "venv" / "bin"


def _roder(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(RODER_HOME=str(cwd / "home"), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", LOCAL_API_KEY="sk-pkg-test")
    return _run([str(bin_dir / "roder"), *args], cwd=cwd, env=env)


def test_the_installed_wheel_runs_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = _run([str(installed / "python"), "-c", "import roder_core, roder_ext_mock; print(roder_core.__file__)"], cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)  # the wheel's copy, not the checkout's
    assert _roder(installed, tmp_path, "--version").stdout.strip() == f"roder {roder_core.__version__}"
    answer = _roder(installed, tmp_path, "-p", "hello", "--provider", "mock")
    assert answer.stdout.startswith("Mock reply:"), answer.stdout


def test_the_installed_wheel_loads_every_extension_and_answers_as_a_server(installed: Path, tmp_path: Path) -> None:
    """Each `roder.extensions` entry point loads from the wheel; `--help`, `doctor` and the stdio
    app server answer."""
    script = (
        "from importlib.metadata import entry_points\n"
        "points = entry_points(group='roder.extensions')\n"
        "print(len(points), all(callable(point.load()) for point in points))\n"
    )
    loaded = _run([str(installed / "python"), "-c", script], cwd=tmp_path).stdout.split()
    assert loaded == [str(len(_declared_extensions())), "True"]
    assert "app-server" in _roder(installed, tmp_path, "--help").stdout
    assert "sandbox" in _roder(installed, tmp_path, "doctor").stdout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    server = subprocess.run(
        [str(installed / "roder"), "app-server", "--provider", "mock"],
        input='{"jsonrpc":"2.0","id":1,"method":"initialize"}\n',
        cwd=tmp_path,
        env={**env, "RODER_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    answer = json.loads(server.stdout.splitlines()[0])
    assert answer["result"]["serverInfo"]["version"] == roder_core.__version__, server.stderr


def _declared_extensions() -> list[str]:
    import tomllib

    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["roder.extensions"])


def test_the_installed_wheel_talks_to_a_real_endpoint(installed: Path, tmp_path: Path) -> None:
    """The fake server and the chat-completions engine both come from the wheel."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "Packaged and answering."}]}))
    server = subprocess.Popen(
        [str(installed / "roder"), "dev", "fake-server", "--script", str(script), "--port", "0", "--model", "m"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["m"]\n'
        )
        answer = _roder(installed, tmp_path, "-p", "hello", "--provider", "local", "--model", "m")
        assert answer.stdout.strip() == "Packaged and answering."
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_classifiers_claim_only_what_is_true() -> None:
    """The command sandbox is bubblewrap, which only Linux has: no other system is claimed, and
    the app is Textual, not curses. The README's requirements line says Linux too."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    classifiers = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["classifiers"]
    assert [c for c in classifiers if c.startswith("Operating System ::")] == ["Operating System :: POSIX :: Linux"]
    assert not [c for c in classifiers if "Curses" in c]
    requirements = next(line for line in (root / "README.md").read_text(encoding="utf-8").splitlines() if "Python 3.11+" in line)
    assert "Linux" in requirements
