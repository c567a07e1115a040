"""Roder's witness of a score's pytest runs: a pytest plugin that the batch score loads into
every pytest it starts (``-p roder_score_witness`` in ``PYTEST_ADDOPTS``).

A score's output and exit status pass through the process that runs the code under test, so
that code can print passing test lines after pytest's summary (``atexit``, a thread still
running, a signal handler) or change the exit status pytest chose (``os._exit(0)`` at exit).
This plugin writes what pytest itself decided to Roder (``RODER_SCORE_WITNESS``): each test
report and each collection that failed or was skipped as pytest made it, the start and the end
of the run with its exit status, and whether the verifier's reward file changed while the tests
ran (only code under test writes it then).

The records go to Roder signed (``roder_score_records``).

When pytest is the program (``pytest``, ``python -m pytest``), the process ends with pytest's
own status as soon as pytest is done, before any ``atexit`` handler, thread or finalizer of the
code under test can run. A run with a start and no end was cut short: Roder does not trust its
exit status.

It runs inside the task's interpreter, which may be older than Roder's: standard library only,
Python 3.6 syntax, types in comments.
"""

import os
import sys

import pytest
import roder_score_records as _records  # type: ignore[import-not-found]  # beside it in the score

# Kept before any code under test is imported: it may replace the ``os`` functions later.
_getframe = sys._getframe


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
# A pytest started from inside this one (a test that runs pytest in a subprocess, an xdist
# worker) is nested: its tests are not the score's, and its reports reach this run anyway.
os.environ["RODER_SCORE_WITNESS_RUN"] = str(os.getpid())
_WORKSPACE = os.path.join(os.path.abspath(os.environ.get("RODER_SCORE_WORKSPACE") or os.getcwd()), "")
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
        _records.record("tampered", what=["the witness plugin was unregistered before the session finished"])
    changed = sorted(name for name, stamp in _records.reward_stamps().items() if stamp != _rewards.get(name))
    if changed:
        _records.record("reward", files=changed)
    _records.record("end", status=status)
    _records.finish()
    if status is not None and _is_program():
        _records.end_process(status)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):  # type: (object, object, object) -> None
    """The earliest hook of a run, before any conftest (which may import the code under test)."""
    _depth[0] += 1
    if _depth[0] == 1:
        _records.begin()
        _rewards.clear()
        _rewards.update(_records.reward_stamps())
        _records.record("start")
        if not _records.NESTED and _is_program():
            _records.adopt_orphans()
    early_config.add_cleanup(_end)  # type: ignore[attr-defined]


def pytest_sessionstart(session):  # type: (object) -> None
    _session.append(session)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):  # type: (object) -> None
    """Once the tests have run, before pytest's own clean-up undoes its monkeypatches."""
    _finished.append(session)
    tampered = _tampering()
    if tampered:
        _records.record("tampered", what=tampered[:20])


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):  # type: (object) -> None
    """Before any test module (and so the code under test) is imported: note the plugins and
    pytest's own code as they are, to tell at the end whether something rewrote them."""
    manager = session.config.pluginmanager  # type: ignore[attr-defined]
    _before.append((manager, set(map(id, manager.get_plugins())), _records.code_identity(_RUNNER_MODULES)))


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
    now = _records.code_identity(_RUNNER_MODULES)
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
        _records.record("collect", id=getattr(report, "nodeid", ""), outcome=outcome)


def pytest_runtest_logreport(report):  # type: (object) -> None
    _records.record(
        "test",
        id=getattr(report, "nodeid", ""),
        when=getattr(report, "when", ""),
        outcome=getattr(report, "outcome", ""),
        xfail=hasattr(report, "wasxfail"),
    )
