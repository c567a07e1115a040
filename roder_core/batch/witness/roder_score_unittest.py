"""Roder's witness of a score's unittest runs, installed by the witness's ``sitecustomize``
when a process of the score imports ``unittest``.

A ``python -m unittest`` score, or a grader script of the task's own that runs unittest and
decides from its result, passes through the process that runs the code under test, so that code
could print ``test_x (mod.Class.test_x) ... ok`` after unittest's summary or end the process
with 0 after unittest chose 1. This records what unittest itself decided, as the pytest witness
does (``roder_score_records``): the start and end of each ``TextTestRunner.run`` (which
``unittest.main`` and most grader scripts and test runners use) with its status, and each test's
outcome as the run's result object was told it. When ``python -m unittest`` is the program, the
process ends with unittest's own status as soon as the run is reported. A run with a start and no
end was cut short.

It runs inside the task's interpreter: standard library only, Python 3.6 syntax, types in comments.
"""

import os
import sys

import roder_score_records as _records  # type: ignore[import-not-found]  # beside it in the score

_getframe = sys._getframe
#: unittest's modules that make, carry and report a test's outcome.
_RUNNER_MODULES = ("unittest.case", "unittest.result", "unittest.runner", "unittest.suite", "unittest.loader", "unittest.main")
#: Their code once the witness is installed, before any test module is imported.
_code = {}  # type: dict[str, int]
#: Whether a watched run is going on in this process (its result's reports are recorded).
_watching = [False]
#: The run of this process that started and has not ended: whether it is recorded.
_run = []  # type: list[bool]
#: The verifier's reward files when the run started.
_rewards = {}  # type: dict[str, object]
#: Each report method of ``TestResult`` and the outcome it records: (outcome, expected failure).
_OUTCOMES = {
    "addSuccess": ("passed", False),
    "addFailure": ("failed", False),
    "addError": ("failed", False),
    "addSkip": ("skipped", False),
    "addExpectedFailure": ("skipped", True),
    "addUnexpectedSuccess": ("passed", True),
}


def install(unittest):  # type: (object) -> None
    """Wrap unittest's runner, result and program once ``unittest`` is imported."""
    import runpy

    # ``unittest.main`` is the package's ``main`` (``TestProgram``), not its module: by name.
    result_class = sys.modules["unittest.result"].TestResult
    for name, (outcome, xfail) in _OUTCOMES.items():
        setattr(result_class, name, _reporting(getattr(result_class, name), outcome, xfail))
    result_class.addSubTest = _sub_tests(result_class.addSubTest)
    runner = sys.modules["unittest.runner"].TextTestRunner
    runner.run = _watched_run(runner.run)
    loader = sys.modules["unittest.loader"].TestLoader
    for name in ("loadTestsFromName", "loadTestsFromNames", "loadTestsFromModule", "discover"):
        setattr(loader, name, _loading(getattr(loader, name)))
    program = sys.modules["unittest.main"].TestProgram
    files = (
        program.__init__.__code__.co_filename,
        os.path.join(os.path.dirname(unittest.__file__), "__main__.py"),  # type: ignore[attr-defined]
        runpy._run_code.__code__.co_filename,  # type: ignore[attr-defined]
    )
    program.runTests = _pinned(program.runTests, files)
    _code.update(_records.code_identity(_RUNNER_MODULES))


def _reporting(method, outcome, xfail):  # type: (object, str, bool) -> object
    def report(self, test, *args):  # type: (object, object, object) -> object
        if _watching[0]:
            _records.record("test", id=str(test), when="call", outcome=outcome, xfail=xfail)
        return method(self, test, *args)  # type: ignore[operator]

    return report


def _sub_tests(method):  # type: (object) -> object
    def add_sub_test(self, test, subtest, err):  # type: (object, object, object, object) -> object
        if _watching[0] and err is not None:  # a failed subtest fails its test
            _records.record("test", id=str(test), when="call", outcome="failed", xfail=False)
        return method(self, test, subtest, err)  # type: ignore[operator]

    return add_sub_test


def _loading(load):  # type: (object) -> object
    def loads(self, *args, **kwargs):  # type: (object, object, object) -> object
        _open()  # before the test modules, and so the code under test, are imported
        return load(self, *args, **kwargs)  # type: ignore[operator]

    return loads


def _open():  # type: () -> None
    """The run starts (when its tests are loaded, or else when they run), once."""
    if _run:
        return
    _run.append(_records.begin())  # False inside another run (unittest under pytest): not recorded
    if _run[0]:
        _rewards.clear()
        _rewards.update(_records.reward_stamps())
        _records.record("start")


def _close(result):  # type: (object) -> None
    """The run is reported: its status (None when it raised), what changed in unittest's code and
    in the verifier's reward files since."""
    recorded = _run.pop()
    _records.finish()
    if not recorded:
        return
    now = _records.code_identity(_RUNNER_MODULES)
    replaced = sorted(name + " was replaced" for name, ident in _code.items() if now.get(name) != ident)
    if replaced:
        _records.record("tampered", what=replaced[:20])
    changed = sorted(name for name, stamp in _records.reward_stamps().items() if stamp != _rewards.get(name))
    if changed:
        _records.record("reward", files=changed)
    status = None if result is None else int(not result.wasSuccessful())  # type: ignore[attr-defined]
    _records.record("end", status=status)


def _watched_run(run):  # type: (object) -> object
    def watched(self, test):  # type: (object, object) -> object
        _open()
        _watching[0] = bool(_run[0])
        result = None
        try:
            result = run(self, test)  # type: ignore[operator]
            return result
        finally:
            _watching[0] = False
            _close(result)

    return watched


def _pinned(runs, files):  # type: (object, tuple[str, str, str]) -> object
    """``TestProgram.runTests`` ending the process with unittest's status when ``python -m
    unittest`` is the program (nothing under it but unittest's ``__main__`` and ``-m``'s start),
    the status computed here: ``sys.exit`` may be the code under test's by then."""
    program_file, main_file, runpy_file = files
    no_tests = getattr(sys.modules["unittest.main"], "_NO_TESTS_EXITCODE", None)  # Python 3.12 and later

    def run_tests(self):  # type: (object) -> None
        if not (getattr(self, "exit", False) and _is_program(program_file, main_file, runpy_file)):
            runs(self)  # type: ignore[operator]
            return
        self.exit = False  # type: ignore[attr-defined]
        runs(self)  # type: ignore[operator]
        result = self.result  # type: ignore[attr-defined]
        if no_tests is not None and result.testsRun == 0 and not result.skipped:
            _records.end_process(no_tests)
        _records.end_process(0 if result.wasSuccessful() else 1)

    return run_tests


def _is_program(program_file, main_file, runpy_file):  # type: (str, str, str) -> bool
    frame = _getframe()
    while frame is not None and not (frame.f_code.co_filename == program_file and frame.f_code.co_name == "__init__"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return False
    below = frame.f_back
    while below is not None:
        if below.f_code.co_filename not in (main_file, runpy_file):
            return False
        below = below.f_back
    return True
