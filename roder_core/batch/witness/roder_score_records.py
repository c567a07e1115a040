"""The records of Roder's score witnesses (``roder_score_witness`` for pytest,
``roder_score_unittest`` for unittest): what each test runner decided, written to the named
pipe Roder reads from outside the score (``RODER_SCORE_WITNESS``).

The code under test can neither truncate nor rewrite what was written, nor open the pipe to
read (its mode is write-only). Each process signs its records with a key of its own, made when
it first records (before any code under test runs) and told to Roder in that first record only,
and numbers them: a record written with ``json.dumps`` by the code under test is not signed,
and Roder refuses the score. The records are encoded with functions kept at import, so a
replaced ``json`` cannot change them.

Also here: what a runner that is the program does when its run ends (kill what the run left
running, then end the process with the runner's status), and the verifier's reward stamps.

It runs inside the task's interpreter, which may be older than Roder's: standard library only,
Python 3.6 syntax, types in comments.
"""

import hashlib
import hmac
import json.encoder
import os
import sys

# Kept before any code under test is imported: it may replace these functions later.
_exit = os._exit
_write = os.write
_getpid = os.getpid
_urandom = os.urandom
_quote = json.encoder.encode_basestring_ascii
_sign = hmac.new
_sha256 = hashlib.sha256

_PATH = os.environ.get("RODER_SCORE_WITNESS", "")
#: A runner started from inside a watched run (a test that runs pytest or unittest in a
#: subprocess, an xdist worker): its tests are not the score's.
NESTED = bool(os.environ.get("RODER_SCORE_WITNESS_RUN"))
_REWARDS = ("reward.txt", "reward.json")
#: The runs of this process not yet ended (a runner run inside another's is not recorded).
_open_runs = [0]


def _open_records():  # type: () -> int
    """The write end of Roder's pipe (it always holds the read end, so the open never waits)."""
    if not _PATH:
        return -1
    try:
        fd = os.open(_PATH, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return -1
    import fcntl

    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)  # a full pipe waits for Roder
    return fd


_fd = _open_records()


class _Signer:
    """This process's signer: its pid, key and the number of its last record (a forked child,
    whose pid differs, makes its own and tells it to Roder in its first record)."""

    pid = 0
    key = b""
    count = 0


_signer = _Signer()


def _encode(value):  # type: (object) -> str
    """JSON of the records' values (strings, numbers, booleans, None, lists, dicts)."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_encode(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_quote(str(k)) + ":" + _encode(v) for k, v in sorted(value.items())) + "}"
    return _quote(str(value))


def record(event, **fields):  # type: (str, object) -> None
    """One signed, numbered JSON line, in one write (a pipe does not mix writes of up to 4 KiB)."""
    if _fd < 0 or NESTED:
        return
    pid = _getpid()
    if _signer.pid != pid:
        _signer.pid, _signer.key, _signer.count = pid, _urandom(32), 0
        fields["key"] = _signer.key.hex()
    _signer.count += 1
    text = _encode(dict(fields, e=event, pid=pid, n=_signer.count))
    mac = _sign(_signer.key, text.encode("ascii"), _sha256).hexdigest()
    try:
        _write(_fd, ('{"r":' + _quote(text) + ',"m":"' + mac + '"}\n').encode("ascii"))
    except OSError:
        pass


def begin():  # type: () -> bool
    """A runner's run starts in this process: whether it is the outermost (the one recorded);
    processes it starts are nested from here on."""
    _open_runs[0] += 1
    os.environ["RODER_SCORE_WITNESS_RUN"] = str(_getpid())
    return _open_runs[0] == 1 and not NESTED


def finish():  # type: () -> None
    _open_runs[0] -= 1


def reward_stamps():  # type: () -> dict[str, object]
    """The verifier's reward files as they are now (Harbor's ``$LOGS_DIR/verifier``)."""
    folder = os.path.join(os.environ.get("LOGS_DIR", ""), "verifier")
    stamps = {}  # type: dict[str, object]
    for name in _REWARDS if os.environ.get("LOGS_DIR") else ():
        try:
            info = os.lstat(os.path.join(folder, name))
        except OSError:
            stamps[name] = None
        else:
            stamps[name] = [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    return stamps


def adopt_orphans():  # type: () -> None
    """Make this process the reaper of every process the run starts, even one that left its
    session and parent (``setsid`` and a double fork), so none can hide from ``_end_leftovers``."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # not Linux: the score's own process group and namespace still end them


def _descendants():  # type: () -> list[int]
    parents = {}  # type: dict[int, int]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):  # a dead one has no children left and harms nothing
            parents[int(name)] = int(fields[1])
    found, frontier = [], [_getpid()]  # type: list[int], list[int]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in found]
        found += children
        frontier = children
    return found


def end_leftovers():  # type: () -> None
    """Kill what the run started and left running: a process of the code under test that waits
    for pytest to end and then writes a reward over the verifier's, or prints passing lines."""
    import signal

    for _ in range(100):
        leftovers = _descendants() if os.path.isdir("/proc") else []
        if not leftovers:
            return
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass


def code_identity(modules):  # type: (tuple[str, ...]) -> dict[str, int]
    """The identity of every function and class (and their members) of ``modules``: those that
    make, carry and report a test's outcome, to tell whether something replaced one."""
    code = {}  # type: dict[str, int]
    for name in modules:
        module = sys.modules.get(name)
        for attr, value in sorted(vars(module).items()) if module is not None else ():
            if not callable(value):
                continue
            code[name + "." + attr] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for member, inner in vars(value).items():
                    if callable(inner) or isinstance(inner, (staticmethod, classmethod, property)):
                        code[name + "." + attr + "." + member] = id(inner)
    return code


def end_process(status):  # type: (int) -> None
    """The runner was the program and its run is over: kill what the run left running, then end
    the process with the runner's status, before any ``atexit`` handler, thread or finalizer of
    the code under test can change it."""
    end_leftovers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or replaced stream must not keep the runner's status from being final
            pass
    _exit(status)
