"""Roder's witness of a score's pytest runs: a pytest plugin that the batch score loads into
every pytest it starts (``-p roder_score_witness`` in ``PYTEST_ADDOPTS``).

A score's output and exit status pass through the process that runs the code under test, so
that code can print passing test lines after pytest's summary (``atexit``, a thread still
running, a signal handler) or change the exit status pytest chose (``os._exit(0)`` at exit).
This plugin writes what pytest itself decided to Roder (``RODER_SCORE_WITNESS``): each test
report and each collection that failed or was skipped as pytest made it, the start and the end
of the run with its exit status, and whether the verifier's reward file changed while the tests
ran (only code under test writes it then).

The records go into a named pipe that Roder reads from outside the score: the code under test
can neither truncate nor rewrite what was written, nor open it to read (its mode is write-only).
Each process signs its records with a key of its own, made at import (before any code under
test runs) and told to Roder in its first record only, and numbers them: a record written with
``json.dumps`` by the code under test is not signed, and Roder refuses the score. The records
are encoded with functions kept at import, so a replaced ``json`` cannot change them.

When pytest is the program (``pytest``, ``python -m pytest``), the process ends with pytest's
own status as soon as pytest is done, before any ``atexit`` handler, thread or finalizer of the
code under test can run. A run with a start and no end was cut short: Roder does not trust its
exit status.

It runs inside the task's interpreter, which may be older than Roder's: standard library only,
Python 3.6 syntax, types in comments.
"""

import hashlib
import hmac
import json.encoder
import os
import sys

import pytest

# Kept before any code under test is imported: it may replace the ``os`` functions later.
_exit = os._exit
_write = os.write
_getpid = os.getpid
_getframe = sys._getframe
_urandom = os.urandom
_quote = json.encoder.encode_basestring_ascii
_sign = hmac.new
_sha256 = hashlib.sha256


def _code_file(module, name):  # type: (str, str) -> str
    """The file of a function's code: fixed when it is compiled, where a module's ``__name__``
    is a string the code under test can change."""
    __import__(module)
    function = getattr(sys.modules[module], name, None)
    return function.__code__.co_filename if function is not None else ""


#: pytest's entry points and Python's ``-m`` runner, told by their code (``_is_program``).
_CONFIG_FILE = _code_file("_pytest.config", "main")
_RUNPY_FILE = _code_file("runpy", "_run_code")
#: Where pytest imports a test module's ``pytest_plugins``, and the plugin manager's own files
#: between there and a registration.
_COLLECT_FILE = _code_file("_pytest.python", "importtestmodule") or _code_file("_pytest.python", "pytest_pycollect_makemodule")
_MANAGER_FILES = (
    _CONFIG_FILE,
    _code_file("pluggy._manager", "_warn_for_function"),
    _code_file("pluggy._manager", "_multicall"),  # pluggy's hook calling, wherever its version keeps it
    getattr(getattr(sys.modules["pluggy._manager"], "HookCaller", None), "call_historic", _code_file).__code__.co_filename,
)
_PATH = os.environ.get("RODER_SCORE_WITNESS", "")
#: A pytest started from inside a watched one (a test that runs pytest in a subprocess, an
#: xdist worker): its tests are not the score's, and its reports reach the outer run anyway.
_NESTED = bool(os.environ.get("RODER_SCORE_WITNESS_RUN"))
os.environ["RODER_SCORE_WITNESS_RUN"] = str(os.getpid())
_WORKSPACE = os.path.join(os.path.abspath(os.environ.get("RODER_SCORE_WORKSPACE") or os.getcwd()), "")
_REWARDS = ("reward.txt", "reward.json")
#: The modules whose code makes, carries and reports a test's outcome.
_RUNNER_MODULES = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.main",
    "_pytest.python",
    "_pytest.unittest",
    "_pytest.outcomes",
    "_pytest.terminal",
    "_pytest.skipping",
    "_pytest.config",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
    "pluggy._caller",  # pluggy 1.6 and later: the hook calling of _hooks and _callers moved here
    "pluggy._execution",
    "unittest.case",
    "unittest.result",
)
_before = []  # type: list[tuple[object, set[int], dict[str, int]]]
#: Configs (one per pytest run in this process, nested ones included) not yet ended.
_depth = [0]
_session = []  # type: list[object]
_finished = []  # type: list[object]
_rewards = {}  # type: dict[str, object]
#: Plugins pytest registered for a test module's ``pytest_plugins`` (the test's own choice).
_named_by_tests = set()  # type: set[int]


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
#: This process's signer: its pid, key and the number of its last record (a forked child,
#: whose pid differs, makes its own and tells it to Roder in its first record).
_signer = [0, b"", 0]  # type: list


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


def _record(event, **fields):  # type: (str, object) -> None
    """One signed, numbered JSON line, in one write (a pipe does not mix writes of up to 4 KiB)."""
    if _fd < 0 or _NESTED:
        return
    pid = _getpid()
    if _signer[0] != pid:
        _signer[:] = [pid, _urandom(32), 0]
        fields["key"] = _signer[1].hex()
    _signer[2] += 1
    text = _encode(dict(fields, e=event, pid=pid, n=_signer[2]))
    mac = _sign(_signer[1], text.encode("ascii"), _sha256).hexdigest()
    try:
        _write(_fd, ('{"r":' + _quote(text) + ',"m":"' + mac + '"}\n').encode("ascii"))
    except OSError:
        pass


def _reward_stamps():  # type: () -> dict[str, object]
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


def _is_program():  # type: () -> bool
    """Whether pytest is the program, not a ``pytest.main()`` call inside another program that
    goes on after it: its console entry point is on the stack (pytest 6 and later), or its
    ``main`` is, run by the ``pytest`` script or ``python -m pytest`` (older ones), with nothing
    under it but a script's or ``-m``'s start. A program that runs pytest and goes on
    (``coverage run -m pytest``, which saves its data after) keeps its own status."""
    program = os.path.basename(sys.argv[0]) in ("pytest", "py.test") or sys.argv[0].endswith(
        os.path.join("pytest", "__main__.py")
    )
    entries = ("console_main", "_console_main", "main") if program else ("console_main", "_console_main")
    frame = _getframe()
    while frame is not None:
        if frame.f_code.co_filename == _CONFIG_FILE and frame.f_code.co_name in entries:
            below = frame.f_back
            while below is not None:
                code = below.f_code
                own = code.co_filename == _CONFIG_FILE and code.co_name in entries  # main under console_main
                if not own and code.co_filename != _RUNPY_FILE and code.co_name != "<module>":
                    return False
                below = below.f_back
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _end():  # type: () -> None
    _depth[0] -= 1
    if _depth[0] > 0:
        return
    status = getattr(_session[-1], "exitstatus", None) if _session else None
    status = int(status) if status is not None else None
    if _session and not _finished:  # pytest finishes every session it starts: this hook was taken away
        _record("tampered", what=["the witness plugin was unregistered before the session finished"])
    changed = sorted(name for name, stamp in _reward_stamps().items() if stamp != _rewards.get(name))
    if changed:
        _record("reward", files=changed)
    _record("end", status=status)
    if status is None or not _is_program():
        return
    _end_leftovers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or replaced stream must not keep pytest's status from being final
            pass
    _exit(status)


def _adopt_orphans():  # type: () -> None
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


def _end_leftovers():  # type: () -> None
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


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):  # type: (object, object, object) -> None
    """The earliest hook of a run, before any conftest (which may import the code under test)."""
    _depth[0] += 1
    if _depth[0] == 1:
        _rewards.clear()
        _rewards.update(_reward_stamps())
        _record("start")
        if not _NESTED and _is_program():
            _adopt_orphans()
    early_config.add_cleanup(_end)  # type: ignore[attr-defined]


def pytest_sessionstart(session):  # type: (object) -> None
    _session.append(session)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):  # type: (object) -> None
    """Once the tests have run, before pytest's own clean-up undoes its monkeypatches."""
    _finished.append(session)
    tampered = _tampering()
    if tampered:
        _record("tampered", what=tampered[:20])


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):  # type: (object) -> None
    """Before any test module (and so the code under test) is imported: note the plugins and
    pytest's own code as they are, to tell at the end whether something rewrote them."""
    manager = session.config.pluginmanager  # type: ignore[attr-defined]
    _before.append((manager, set(map(id, manager.get_plugins())), _runner_code()))


def _runner_code():  # type: () -> dict[str, int]
    """The identity of every function and class (and their members) of pytest's and pluggy's
    modules that make, carry and report a test's outcome."""
    code = {}  # type: dict[str, int]
    for name in _RUNNER_MODULES:
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


def pytest_plugin_registered(plugin):  # type: (object) -> None
    """Note a plugin pytest itself imported for a test module's ``pytest_plugins``: between the
    registration and pytest's collection only the plugin manager's frames (code is known by its
    file, which the code under test cannot change); the code under test registering one has its
    own frames there."""
    frame = _getframe(1)
    while frame is not None:
        where = frame.f_code.co_filename
        if where == _COLLECT_FILE:
            _named_by_tests.add(id(plugin))
            return
        if where not in _MANAGER_FILES:
            return
        frame = frame.f_back  # type: ignore[assignment]


def _tampering():  # type: () -> list[str]
    """What changed in the runner since collection began: a plugin added by code that is not a
    conftest (the code under test registering hooks), the witness removed, pytest's code replaced."""
    if not _before:
        return []
    manager, plugins, code = _before[0]
    found = []
    if sys.modules[__name__] not in manager.get_plugins():  # type: ignore[attr-defined]
        found.append("the witness plugin was unregistered")
    for plugin in manager.get_plugins():  # type: ignore[attr-defined]
        name = getattr(plugin, "__file__", None) or ""
        if id(plugin) in plugins or id(plugin) in _named_by_tests:
            continue
        if os.path.basename(name) != "conftest.py" and _in_workspace(name):
            kind = getattr(plugin, "__name__", None) or type(plugin).__module__ + "." + type(plugin).__qualname__
            found.append("plugin registered while the tests ran: " + str(kind)[:120])
    now = _runner_code()
    found += sorted(name + " was replaced" for name, ident in code.items() if now.get(name) != ident)
    return found


def _in_workspace(path):  # type: (str) -> bool
    """Whether a plugin is code of the workspace or no module at all (an object the code under
    test registered). A module installed in the score's environment (``pytester``, named by a
    test module's ``pytest_plugins``) is not."""
    return not path or os.path.abspath(path).startswith(_WORKSPACE)


def pytest_collectreport(report):  # type: (object) -> None
    """A collector that failed or was skipped (a test module that raised on import): its tests
    have no reports of their own, and Roder reads them as not passed in this run."""
    outcome = getattr(report, "outcome", "")
    if outcome != "passed":
        _record("collect", id=getattr(report, "nodeid", ""), outcome=outcome)


def pytest_runtest_logreport(report):  # type: (object) -> None
    _record(
        "test",
        id=getattr(report, "nodeid", ""),
        when=getattr(report, "when", ""),
        outcome=getattr(report, "outcome", ""),
        xfail=hasattr(report, "wasxfail"),
    )
