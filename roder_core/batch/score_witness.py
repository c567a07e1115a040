"""What a score's test runner decided, told apart from what the code under test printed.

A score runs the code under test in the same process as the test runner, so the process's
output and exit status are not the runner's alone: an ``atexit`` handler, a thread still running
at exit, a signal handler or a finalizer of that code can print ``PASSED tests/x.py::t`` after
pytest's summary, or end the process with status 0 after pytest chose 1, and a stand-in for
pytest can print passing lines without running anything. So the verdict is read from sources
the code under test does not write as a side effect:

- every pytest a host score starts loads Roder's witness plugin (``witness/roder_score_witness``,
  copied into the rollout's scratch and shown read-only to the score), which records each test
  report as pytest made it, the run's start and end, and ends the process with pytest's own
  status as soon as pytest is done. A pytest test's status is read from those records only.
  They come through a named pipe only Roder reads, each signed by its process's own key (told in
  its first record, made before any code under test runs) and numbered: a record the code under
  test wrote is refused, and a run that started while another was going on is not the score's;
- other runners' status lines (unittest's ``test_x (mod.Class) ... ok``) are read from the
  output, and one printed after the runner's final summary fails the score closed;
- anything that cannot be ruled out a forgery fails closed (:class:`ForgedResult`, the score is
  ``score_refused`` with the reason): a pytest run that started and never ended while the score
  exited 0 or wrote a reward, a reward file changed while pytest ran (only the code under test
  writes it then), pytest results printed where no pytest ran, pytest changed from inside (a
  plugin the code under test registered, the witness unregistered, pytest's reporting code
  replaced; the witness compares them when the session finishes).

What stays open is code that attacks the runner from inside in ways the witness does not look
for (a change undone before the session finishes): ``docs/batch.md`` says so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import select
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.batch.swebench import PASSING, parse_test_statuses

#: The plugin module pytest loads (``-p``); it runs in the task's interpreter.
PLUGIN = "roder_score_witness"
PLUGIN_SOURCE = Path(__file__).with_name("witness") / f"{PLUGIN}.py"
#: tox (4.11 and later) clears the environment of the commands it runs: it passes these on.
_TOX_PASSES = "testenv.pass_env+=PYTHONPATH,PYTEST_ADDOPTS,RODER_SCORE_*"
#: The records of a score are read up to this size; a score that wrote more is refused.
RECORDS_CAP = 64 * 1024 * 1024

#: The last line a runner prints: pytest's ``=== 1 failed, 2 passed in 0.12s ===`` and
#: unittest's ``Ran 3 tests in 0.001s``. No status line of an honest run comes after it.
_FINAL_LINE = re.compile(r"^(=+ .*\bin [\d.]+s\b.*=+|Ran \d+ tests? in [\d.]+s)$")
#: pytest's tally, with ``=`` around it or without (``-q``): ``1 failed, 2 passed in 0.12s``.
_PYTEST_TALLY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s\b.*$")
#: unittest's verdict after its final line (``FAILED (failures=1)``), which reads like a status.
_UNITTEST_VERDICT = re.compile(r"^(OK|FAILED)( \(.*\))?$")


class ForgedResult(Exception):
    """The score's result cannot be told apart from a forgery; the message says why."""


@dataclass
class WitnessReport:
    """What the witness recorded: each pytest run's start and end status (by the process that
    made it, its pid and key), each test's status."""

    started: dict[str, int] = field(default_factory=dict)
    ended: dict[str, int | None] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    reward_files: list[str] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)

    def cut_short(self) -> list[int]:
        """The pids of the pytest runs that started and never reached their end."""
        return sorted(pid for run, pid in self.started.items() if run not in self.ended)


@dataclass
class _Signer:
    """One process's key (from its first record) and the number of its last record."""

    pid: int
    key: bytes
    count: int = 0
    run: str | None = None  # its pytest run now going on, if any
    runs: int = 0


@dataclass
class Witness:
    """The witness of one score: the plugin's folder (read-only to the score) and the named
    pipe in it that its records come through, read by Roder while the score runs."""

    folder: Path
    records: Path
    received: bytearray = field(default_factory=bytearray)
    overflow: bool = False

    @classmethod
    def prepare(cls, scratch: Path, verifier: Path) -> Witness:
        """Copy the plugin into the rollout's scratch (Roder's own files may sit under a /tmp the
        score's sandbox does not show); its records come through a pipe beside it."""
        folder = scratch / "witness"
        folder.mkdir(exist_ok=True)
        for source in PLUGIN_SOURCE.parent.glob("*.py"):
            shutil.copyfile(source, folder / source.name)
        return cls(folder, folder / "records")

    def environment(self, env: dict[str, str], workspace: Path) -> dict[str, str]:
        """``env`` with the plugin importable and loaded by every pytest (the task's own
        ``PYTHONPATH`` and ``PYTEST_ADDOPTS`` kept after it), told where its records go and
        which folder is the agent's (a plugin from there registered mid-run is tampering), and
        tox told to pass all of it on to the commands it runs."""
        path = os.pathsep.join(p for p in (str(self.folder), env.get("PYTHONPATH", "")) if p)
        options = " ".join(o for o in (env.get("PYTEST_ADDOPTS", ""), f"-p {PLUGIN}") if o)
        told = {"RODER_SCORE_WITNESS": str(self.records), "RODER_SCORE_WORKSPACE": str(workspace)}
        tox = ";".join(o for o in (env.get("TOX_OVERRIDE", ""), _TOX_PASSES) if o)
        return {**env, "PYTHONPATH": path, "PYTEST_ADDOPTS": options, "TOX_OVERRIDE": tox, **told}

    @contextmanager
    def listening(self) -> Iterator[None]:
        """While the score runs: the records pipe exists, write-only to everyone (nobody in the
        score can open it to read records away; its folder is read-only there, so its mode
        stays), and a thread of Roder's reads it (a writer waits while the pipe is full)."""
        self.records.unlink(missing_ok=True)
        os.mkfifo(self.records, 0o600)
        reader = os.open(self.records, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        keeper = os.open(self.records, os.O_WRONLY | os.O_CLOEXEC)  # no end of file between writers
        os.chmod(self.records, 0o200)
        stop_read, stop_write = os.pipe()
        thread = threading.Thread(target=self._collect, args=(reader, stop_read), name="score-witness", daemon=True)
        thread.start()
        try:
            yield
        finally:
            os.write(stop_write, b"x")
            thread.join()
            for fd in (reader, keeper, stop_read, stop_write):
                os.close(fd)

    def _collect(self, reader: int, stop: int) -> None:
        """Read what arrives until told to stop, then what is in the pipe then: at most the cap
        more, so a process left writing (with the sandbox off) never keeps the score from ending."""
        after_stop: int | None = None
        while True:
            if after_stop is None:
                ready, _, _ = select.select([reader, stop], [], [])
                after_stop = 0 if stop in ready else None
            try:
                chunk = os.read(reader, 65536)
            except BlockingIOError:
                if after_stop is not None:
                    return
                continue
            if after_stop is not None:
                after_stop += len(chunk)
                if after_stop > RECORDS_CAP:
                    self.overflow = True
                    return
            if len(self.received) + len(chunk) > RECORDS_CAP:
                self.overflow = True  # still read on, so no writer waits forever
            else:
                self.received += chunk

    def report(self) -> WitnessReport:
        """The records the score's pytest runs left (none: no pytest ran). A line that is not
        signed by the key its process told first, or out of its process's order, is a forgery.
        A run that started while another process's run was going on is not the score's (a
        pytest the tests started, or one the code under test started to report passes): its
        test statuses are not read."""
        report = WitnessReport()
        if self.overflow:
            raise ForgedResult(f"the test runs' records exceed {RECORDS_CAP // (1024 * 1024)} MiB, so they were not read")
        signers: dict[str, _Signer] = {}
        open_runs: set[str] = set()
        counted: dict[str, _RunRecords] = {}
        for line in bytes(self.received).splitlines():
            record, signer = _verified(line, signers)
            event, run = record["e"], signer.run
            if event == "start":
                signer.runs += 1
                signer.run = f"{signer.key.hex()[:16]}.{signer.runs}"
                report.started[signer.run] = signer.pid
                if not open_runs:
                    counted[signer.run] = _RunRecords()
                open_runs.add(signer.run)
            elif event == "end" and run is not None:
                report.ended[run] = record.get("status")
                open_runs.discard(run)
                signer.run = None
            elif event == "tampered":
                report.tampered += [str(what) for what in record.get("what", [])]
            elif event == "reward":
                report.reward_files += [str(name) for name in record.get("files", [])]
            elif event in ("test", "collect") and run in counted:
                counted[run].note(record)
        report.statuses = _worst(list(counted.values()))
        return report


@dataclass
class _RunRecords:
    """One counted run's reports: each test's phases, and the collectors that did not pass."""

    phases: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    collectors: dict[str, str] = field(default_factory=dict)

    def note(self, record: dict[str, Any]) -> None:
        node = str(record.get("id"))
        if record["e"] == "collect":
            self.collectors[node] = "ERROR" if record.get("outcome") == "failed" else "SKIPPED"
        else:
            phase = (str(record.get("when")), str(record.get("outcome")), bool(record.get("xfail")))
            self.phases.setdefault(node, []).append(phase)


def _verified(line: bytes, signers: dict[str, _Signer]) -> tuple[dict[str, Any], _Signer]:
    """A record and its process's signer, or :class:`ForgedResult`."""
    try:
        outer = json.loads(line)
        text, mac = str(outer["r"]), str(outer["m"])
        record = json.loads(text)
        pid, count, key = int(record["pid"]), int(record["n"]), record.get("key")
        str(record["e"])
        signer = signers.get(key) if isinstance(key, str) else None
        if signer is None and isinstance(key, str) and count == 1:
            signer = signers.setdefault(key, _Signer(pid, bytes.fromhex(key)))
        if signer is None:
            signer = next(s for s in signers.values() if s.pid == pid)
        made = hmac.new(signer.key, text.encode("ascii"), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(made, mac) or count != signer.count + 1 or pid != signer.pid:
            raise ValueError("not signed")
    except (ValueError, KeyError, TypeError, StopIteration, UnicodeError, AttributeError) as exc:
        raise ForgedResult(f"the test runs' records hold a line pytest's witness did not write: {line[:80]!r}") from exc
    signer.count = count
    return record, signer


def _worst(runs: list[_RunRecords]) -> dict[str, str]:
    """Each test's status over the score's runs: one that did not pass in some run stays so,
    and so does one under a collector that failed or was skipped in some run (a test module
    that raised on import has no test reports; another run's pass does not stand for them)."""
    combined: dict[str, str] = {}
    for run in runs:
        for test, phases in run.phases.items():
            status = _status(phases)
            combined[test] = status if combined.get(test, "PASSED") in PASSING else combined[test]
    for run in runs:
        for node, status in run.collectors.items():
            for test in combined:
                under = not node or test == node or test.startswith((f"{node}::", f"{node}/"))
                if under and combined[test] in PASSING:
                    combined[test] = status
    return combined


def _status(phases: list[tuple[str, str, bool]]) -> str:
    """One test's status in pytest's ``-rA`` words, from its setup, call and teardown reports."""
    for when, outcome, _ in phases:
        if outcome == "failed":
            return "FAILED" if when == "call" else "ERROR"
    for when, outcome, xfail in phases:
        if outcome == "skipped":
            return "XFAIL" if xfail else "SKIPPED"
        if when == "call" and outcome == "passed":
            return "XPASS" if xfail else "PASSED"
    return "ERROR"  # set up and torn down, never called


def check_run(report: WitnessReport | None, *, passing: bool) -> None:
    """Raise :class:`ForgedResult` when the score's exit status or reward may not be the
    tests' own: a reward file changed while pytest ran, or a pytest run cut short while the
    score still passes (``passing``: a reward above 0, or no reward and exit status 0). A cut
    run in a score that fails (a crash, with Harbor's ``reward 0`` and exit 0) is a plain failure."""
    if report is None:
        return
    if report.tampered:
        shown = "; ".join(report.tampered[:3]) + (f" and {len(report.tampered) - 3} more" if len(report.tampered) > 3 else "")
        raise ForgedResult(f"pytest was changed while the tests ran, so its reports are not its own: {shown}")
    if report.reward_files:
        raise ForgedResult(
            f"{', '.join(sorted(set(report.reward_files)))} changed while pytest ran: the code under test "
            "wrote the verifier's reward, not the score after the tests"
        )
    cut = report.cut_short()
    if cut and passing:
        raise ForgedResult(
            f"the score passed, but its test run ended before pytest finished it (process {cut[0]}): "
            "the code under test ended the process, so neither its status nor a reward is pytest's"
        )


#: What pytest prints when the score replaced the ``PYTHONPATH`` that makes the witness importable.
_NOT_IMPORTED = f'Error importing plugin "{PLUGIN}"'
#: How a score keeps the witness while setting these variables of its own.
_EXTEND = 'extend them instead of replacing them (PYTHONPATH="src:$PYTHONPATH", PYTEST_ADDOPTS="$PYTEST_ADDOPTS -x")'


def check_loaded(output: str, report: WitnessReport | None) -> None:
    """Raise :class:`ForgedResult` saying how to fix the score when its pytest could not load
    the witness because the score set ``PYTHONPATH`` itself or ran Python isolated (pytest then
    stops with a usage error before any test, which would read as the agent's failure)."""
    if report is not None and _NOT_IMPORTED in output:
        raise ForgedResult(
            "pytest could not load Roder's witness: the score set PYTHONPATH or PYTEST_ADDOPTS itself, or ran Python "
            f"with -I or -E, which ignore PYTHONPATH; {_EXTEND}, and run pytest without -I or -E"
        )


def check_exit(output: str, exit_code: int | None, report: WitnessReport | None) -> None:
    """For a score decided by its exit status: raise :class:`ForgedResult` when it exited 0 but
    the last test run it printed failed (unittest's ``FAILED (failures=1)``, pytest's
    ``1 failed``), which is the code under test ending the process with 0 after the runner
    chose 1 (``os._exit(0)`` from ``atexit``). A pytest the witness watched keeps its own status
    and is not read from the output."""
    if exit_code != 0 or (report is not None and report.started):
        return  # a runner the witness watched kept its own status (or its run was cut short)
    last = None
    lines = [line.strip() for line in output.splitlines()]
    for index, line in enumerate(lines):
        tally = _PYTEST_TALLY.match(line)
        if tally:
            last = line if re.search(r"\d+ (failed|errors?)\b", tally.group(1)) else None
        elif _UNITTEST_VERDICT.match(line) and any(ran.startswith("Ran ") for ran in lines[max(0, index - 3) : index]):
            last = line if line.startswith("FAILED") else None
    if last is not None:
        raise ForgedResult(f"the score exited 0, but the last test run it printed failed ({last}): not the runner's status")


def test_statuses(output: str, report: WitnessReport | None) -> dict[str, str]:
    """Each test's status: a pytest test's from the witness alone (when it watched the score),
    another runner's from the output, where a status line printed after the runner's final
    summary is a forgery (:class:`ForgedResult`)."""
    if report is not None and report.started:
        return dict(report.statuses)  # what the runners the witness watched decided; the output is not read
    lines = output.splitlines()
    final = max((i for i, line in enumerate(lines) if _FINAL_LINE.match(line.strip())), default=-1)
    after = [line for line in lines[final + 1 :] if not _UNITTEST_VERDICT.match(line.strip())] if final >= 0 else []
    late = parse_test_statuses("\n".join(after))
    printed = parse_test_statuses(output)
    if report is not None:
        late = {test: status for test, status in late.items() if "::" not in test}  # pytest's are not read
        if any("::" in test for test in printed):
            raise ForgedResult(
                "the score printed pytest results, but no pytest that loaded Roder's witness ran (a stand-in for pytest "
                f"printed them, or the score set PYTEST_ADDOPTS or PYTHONPATH itself: {_EXTEND}; a runner that clears the "
                "environment (tox before 4.11, a script's own) passes PYTHONPATH, PYTEST_ADDOPTS and RODER_SCORE_* on)"
            )
        printed = {test: status for test, status in printed.items() if "::" not in test}
    if late:
        shown = ", ".join(sorted(late)[:3])
        raise ForgedResult(f"test results were printed after the test runner's summary ({shown}): not the runner's")
    return printed
