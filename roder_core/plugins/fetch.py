"""Bringing plugin and marketplace sources onto the machine: git, archives, npm, commands.

Everything here is blocking (callers run it in a worker thread) and runs only when the user asked
for an install, an add or a refresh. Git runs as ``git`` with prompts off; an archive is fetched
over HTTPS through ``brokers.outbound`` (addresses off the public internet are refused after
resolution, the connection pinned to the checked address; loopback hosts are let through only
when ``[plugins] allow_loopback_http`` is set, which the tests use); an npm package is fetched
with ``npm pack --ignore-scripts`` (no lifecycle script runs) and unpacked; a ``command`` source runs the exact command the user
accepted, from ``$HOME``, and must print one absolute directory.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from roder_core.brokers.addresses import is_loopback_host
from roder_core.brokers.outbound import OutboundRefused, OutboundRule, normal_host, sync_transport
from roder_core.brokers.safe_git import host_git
from roder_core.plugins.manifest import PluginSource

DEFAULT_GITHUB_URL = "https://github.com/{repo}.git"
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
GIT_TIMEOUT = 300.0
NPM_TIMEOUT = 300.0
#: Hosts an archive may never come from (cloud metadata services).
_METADATA_HOSTS = frozenset({"169.254.169.254", "metadata.google.internal", "fd00:ec2::254"})


class FetchError(RuntimeError):
    """A source could not be fetched; the message says what failed and where."""


@dataclass(frozen=True)
class FetchSettings:
    """How sources are reached. ``github_url`` is a template for ``owner/repo`` (a mirror or a
    local bare repository: ``file:///srv/git/{repo}.git``)."""

    github_url: str = DEFAULT_GITHUB_URL
    allow_loopback_http: bool = False


@dataclass(frozen=True)
class Fetched:
    """A fetched source: the folder holding the plugin (or catalog), and what identifies it."""

    path: Path
    commit: str | None = None
    digest: str | None = None


def _run(argv: list[str], *, cwd: Path | None = None, timeout: float, what: str) -> str:
    """Run git (the system's: ``safe_git.host_git``) and return its output."""
    if argv[0] == "git":
        argv = [host_git() or "git", *argv[1:]]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise FetchError(f"{what}: {argv[0]} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise FetchError(f"{what}: timed out after {timeout:g}s") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise FetchError(f"{what}: {' '.join(argv[:2])} failed: {detail[-1] if detail else f'exit {done.returncode}'}")
    return done.stdout


def git_url(source: PluginSource, settings: FetchSettings) -> str:
    """The clone URL of a github, url or git-subdir source (``o/r`` shorthand included)."""
    if source.kind == "github" or (source.kind == "git-subdir" and "://" not in source.url and "@" not in source.url):
        repo = source.repo or source.url
        return settings.github_url.format(repo=repo.removesuffix(".git"))
    return source.url


#: git over the network follows no redirect (the host checked is the host reached).
_GIT_NO_REDIRECTS = ["-c", "http.followRedirects=false"]


def check_git_host(url: str, settings: FetchSettings) -> None:
    """Refuse a network git URL whose host resolves off the public internet (the outbound
    rule; loopback only with ``[plugins] allow_loopback_http``). git resolves the name again
    itself, so this is checked, not pinned; local paths and ``file://`` are not network."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not parts.scheme and "@" in url.split(":", 1)[0] and ":" in url:  # scp-like user@host:path
        host = url.split("@", 1)[1].split(":", 1)[0]
    elif parts.scheme not in ("http", "https", "git", "ssh", "git+ssh", "ssh+git"):
        return
    host = normal_host(host)
    named = {host} if settings.allow_loopback_http and is_loopback_host(host) else set()
    rule = OutboundRule(frozenset(named), "[plugins] allow_loopback_http")
    try:
        rule.check(host, rule.resolve(host, parts.port or 443))
    except OutboundRefused as exc:
        raise FetchError(f"{url}: {exc}") from exc


def clone(url: str, dest: Path, *, ref: str | None = None, sha: str | None = None, settings: FetchSettings | None = None) -> str:
    """Clone ``url`` into ``dest`` at ``sha`` (wins) or ``ref``; returns the commit checked out."""
    what = f"cloning {url}"
    check_git_host(url, settings or FetchSettings())
    if sha is None:
        branch = ["--branch", ref] if ref else []
        argv = ["git", *_GIT_NO_REDIRECTS, "clone", "--quiet", "--depth", "1", *branch, url, str(dest)]
        _run(argv, timeout=GIT_TIMEOUT, what=what)
    else:
        _run(["git", *_GIT_NO_REDIRECTS, "clone", "--quiet", url, str(dest)], timeout=GIT_TIMEOUT, what=what)
        _run(["git", "checkout", "--quiet", sha], cwd=dest, timeout=GIT_TIMEOUT, what=f"checking out {sha}")
    return _run(["git", "rev-parse", "HEAD"], cwd=dest, timeout=60, what="reading the commit").strip()


def pull(dest: Path, ref: str | None = None) -> str:
    """Update a clone to the newest commit of its branch (or ``ref``); returns the commit."""
    target = ref or "HEAD"
    _run(["git", "fetch", "--quiet", "--depth", "1", "origin", target], cwd=dest, timeout=GIT_TIMEOUT, what="fetching")
    _run(["git", "reset", "--quiet", "--hard", "FETCH_HEAD"], cwd=dest, timeout=60, what="updating")
    return _run(["git", "rev-parse", "HEAD"], cwd=dest, timeout=60, what="reading the commit").strip()


def head_commit(folder: Path) -> str | None:
    """The commit of the git work tree holding ``folder``, if it is one."""
    try:
        return _run(["git", "rev-parse", "HEAD"], cwd=folder, timeout=30, what="reading the commit").strip() or None
    except FetchError:
        return None


def check_url(url: str, settings: FetchSettings) -> None:
    """Refuse what an archive or catalog download must not reach."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host:
        raise FetchError(f"{url}: not a URL with a host")
    if host in _METADATA_HOSTS:
        raise FetchError(f"{url}: metadata hosts are refused")
    local = is_loopback_host(host) or _link_local(host)
    if local and not settings.allow_loopback_http:
        raise FetchError(f"{url}: loopback and link-local hosts are refused (set [plugins] allow_loopback_http)")
    if parts.scheme != "https" and not (parts.scheme == "http" and local and settings.allow_loopback_http):
        raise FetchError(f"{url}: only https downloads are allowed")


def _link_local(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_link_local
    except ValueError:
        return False


def download(url: str, dest: Path, settings: FetchSettings, *, limit: int = MAX_ARCHIVE_BYTES) -> str:
    """Download ``url`` to ``dest``; returns the sha256 of what was written."""
    import httpx

    check_url(url, settings)
    host = normal_host(urlsplit(url).hostname or "")
    named = {host} if settings.allow_loopback_http and is_loopback_host(host) else set()
    rule = OutboundRule(frozenset(named), "[plugins] allow_loopback_http")
    digest = hashlib.sha256()
    size = 0
    try:
        with (
            httpx.Client(follow_redirects=False, timeout=60.0, trust_env=False, transport=sync_transport(rule)) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise FetchError(f"{url}: HTTP {response.status_code}")
            with open(dest, "wb") as out:
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise FetchError(f"{url}: larger than {limit // (1024 * 1024)} MiB")
                    digest.update(chunk)
                    out.write(chunk)
    except httpx.HTTPError as exc:
        raise FetchError(f"{url}: {type(exc).__name__}: {exc}") from exc
    except OutboundRefused as exc:
        raise FetchError(f"{url}: {exc}") from exc
    return digest.hexdigest()


def _safe_member(root: Path, name: str) -> Path | None:
    target = (root / name).resolve()
    return target if target == root.resolve() or target.is_relative_to(root.resolve()) else None


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack a zip or tar archive into ``dest`` (no member may leave it); returns the plugin
    folder: ``dest`` itself, or the one top-level folder the archive holds."""
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.infolist():
                target = _safe_member(dest, member.filename)
                if target is None:
                    raise FetchError(f"{archive.name}: member {member.filename!r} leaves the archive")
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                mode = (member.external_attr >> 16) & 0o777
                if mode:
                    target.chmod(mode | 0o600)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    else:
        raise FetchError(f"{archive.name}: not a zip or tar archive")
    entries = [p for p in dest.iterdir() if p.name not in ("__MACOSX",)]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return dest


def fetch_archive(source: PluginSource, work: Path, settings: FetchSettings) -> Fetched:
    archive = work / "download"
    digest = download(source.url, archive, settings)
    if source.sha256 and source.sha256.lower() != digest:
        raise FetchError(f"{source.url}: sha256 is {digest}, the catalog says {source.sha256}")
    root = unpack(archive, work / "unpacked")
    archive.unlink()
    return Fetched(root, digest=digest)


def fetch_npm(source: PluginSource, work: Path) -> Fetched:
    """``npm pack`` the package (no lifecycle scripts run) and unpack its tarball."""
    spec = source.package if not source.version else f"{source.package}@{source.version}"
    if Path(source.package).expanduser().is_absolute() or source.package.startswith(("./", "file:")):
        spec = source.package  # a local tarball or folder
    argv = ["npm", "pack", spec, "--ignore-scripts", "--pack-destination", str(work)]
    if source.registry:
        argv += ["--registry", source.registry]
    _run(argv, cwd=work, timeout=NPM_TIMEOUT, what=f"fetching npm package {spec}")
    found = sorted(work.glob("*.tgz"))
    if not found:
        raise FetchError(f"npm pack {spec}: no tarball was written")
    tarball = found[0]
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    root = unpack(tarball, work / "unpacked")
    return Fetched(root, digest=digest)


def run_command_source(source: PluginSource) -> Path:
    """Run an accepted ``command`` source from ``$HOME``; it must print one absolute directory."""
    home = Path.home()
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", source.command],
            cwd=home if home.is_dir() else None,
            capture_output=True,
            text=True,
            timeout=source.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise FetchError(f"command source `{source.command}` timed out after {source.timeout:g}s") from exc
    if done.returncode != 0:
        raise FetchError(f"command source `{source.command}` exited with {done.returncode}: {done.stderr.strip()[-300:]}")
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if len(lines) != 1 or not Path(lines[0]).is_absolute() or not Path(lines[0]).is_dir():
        raise FetchError(f"command source `{source.command}` must print exactly one absolute directory, printed {lines[:3]!r}")
    return Path(lines[0])


def content_hash(folder: Path) -> str:
    """A hash of every file's relative path and bytes (the version of unversioned sources)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def copy_plugin(src: Path, dest: Path, boundary: Path, problems: list[str]) -> None:
    """Copy a plugin folder. Symlinks inside the plugin are kept; ones pointing elsewhere inside
    ``boundary`` (the marketplace) are copied as files; ones pointing outside are dropped."""
    src_real, boundary_real = src.resolve(), boundary.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for current, dirs, files in os.walk(src):
        here = Path(current)
        relative = here.relative_to(src)
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            path = here / name
            target = dest / relative / name
            if path.is_symlink():
                pointed = path.resolve()
                if pointed.is_relative_to(src_real):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(os.readlink(path), target)
                    if name in dirs:
                        dirs.remove(name)
                elif pointed.is_relative_to(boundary_real) and pointed.exists():
                    if pointed.is_dir():
                        shutil.copytree(pointed, target, symlinks=False)
                        dirs.remove(name)
                    else:
                        shutil.copy2(pointed, target)
                else:
                    problems.append(f"{relative / name} points outside the marketplace; not copied")
                    if name in dirs:
                        dirs.remove(name)
                continue
            if name in dirs:
                target.mkdir(parents=True, exist_ok=True)
            else:
                shutil.copy2(path, target)


def scratch(parent: Path) -> Path:
    """A private work folder under ``parent`` (same file system as the destination)."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".fetch-", dir=parent))
