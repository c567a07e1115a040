"""Harbor tasks that bring a Dockerfile, through ``roder batch`` with a real Podman: the image is
built from a base image made on this machine (no registry), the agent's tools run in its
container (the task's files at its WORKDIR), the tests run there at ``/tests`` with the
verifier's environment, and a task whose image cannot be built is reported as not run and left
out of the pass rate. Terminal-Bench 1 folders are refused, naming the layout. Where Podman cannot
run containers, the container test says why it skips."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from roder_core.batch.tasks import TaskFileError, load_tasks
from tests.batch.conftest import result, run_cli, steps, write_script
from tests.runners.test_container_runner import Podman, podman  # noqa: F401  (the fixture)

JUDGE = "judge-value-5d1e9f3c2a7b"


def _task(root: Path, name: str, dockerfile: str, *, verifier_env: str = "") -> Path:
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(f'version = "1.0"\n[verifier]\ntimeout_sec = 120.0\n{verifier_env}')
    (folder / "instruction.md").write_text("Write 42 to answer.txt.\n")
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    (folder / "environment" / "app.txt").write_text("the app\n")
    (folder / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        'if [ "$(cat /app/answer.txt)" = 42 ] && [ -f /app/built.txt ] && [ -f /tests/test.sh ] '
        f'&& [ "$JUDGE" = "{JUDGE}" ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\necho scored in $(pwd)\n"
    )
    return folder


@pytest.mark.timeout(600)
def test_a_dockerfile_task_is_built_and_run_in_its_container(
    tmp_path: Path,
    podman: Podman,  # noqa: F811
    roder_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if shutil.which("busybox") is None:
        pytest.skip("busybox is not installed (.ci/run installs busybox-static): the test image needs its tools")
    root = tmp_path / "tasks"
    _task(
        root,
        "in-image",
        # The base image holds a few host programs; busybox gives it the rest of a shell's tools.
        f"FROM {podman.image}\n"
        'RUN ["/usr/bin/busybox", "--install", "-s", "/usr/bin"]\n'
        "WORKDIR /app\nCOPY app.txt /app/app.txt\nRUN echo from-build > /app/built.txt\n",
        verifier_env=f'[verifier.env]\nJUDGE = "{JUDGE}"\n',
    )
    _task(root, "no-base", "FROM localhost/roder-no-such-base:never\nWORKDIR /app\n")
    # The batch's container runner gives the engine settings this machine needs (its OCI runtime).
    (roder_home / "config.toml").write_text(podman.runner_table("box"))
    script = [
        {
            "text": "Looking.",
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {"command": 'pwd; cat built.txt app.txt; echo "judge=[$JUDGE]"; echo 42 > answer.txt'},
                }
            ],
        },
        {"text": "Done."},
    ]
    monkeypatch.setenv("RODER_MOCK_SCRIPT", str(write_script(tmp_path / "agent.json", script)))
    out = tmp_path / "out"
    code, _, err = run_cli(
        capsys, "batch", root, "--out", out, "--workers", "1", "--no-progress", "--provider", "mock", "--runner", "box"
    )
    assert code == 0, err
    ran = result(out, "in-image")
    log = (out / "rollouts/in-image/0/score.log").read_text()
    assert ran["passed"], log
    assert ran["reward"] == 1.0
    assert ran["score_sandbox"] == "container"
    assert ran["container"]["workdir"] == "/app" and ran["container"]["source"].startswith("built from")
    assert ran["runner"]["kind"] == "container"
    assert "scored in /app" in log
    listing = next(s for s in steps(out, "in-image") if s["type"] == "tool_call")["result"]["text"]
    assert "/app" in listing and "from-build" in listing and "the app" in listing
    assert "judge=[]" in listing  # the verifier's environment never reached the agent
    assert "+42" in (out / "rollouts/in-image/0/workspace.diff").read_text()
    for path in out.rglob("*"):
        if path.is_file():
            assert JUDGE not in path.read_text(errors="replace"), path
    missing = result(out, "no-base")
    assert missing["exit_reason"] == "not_run" and missing["failure_cause"] == "environment_unavailable"
    assert "could not build" in missing["error"]["message"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rollouts"], summary["passed"], summary["pass_rate"]) == (1, 1, 1.0)  # not_run is apart
    assert summary["not_run"]["rollouts"] == 1
    assert "could not build" in summary["not_run"]["reasons"]["no-base#0"]
    built = json.loads(subprocess.run(["podman", "images", "--format", "json"], capture_output=True, text=True).stdout)
    for image in built:
        for name in image.get("Names") or []:
            if name.startswith("localhost/roder-task-") and name == ran["container"]["image"]:
                subprocess.run(["podman", "rmi", "-f", name], capture_output=True, check=False)


def test_a_terminal_bench_1_folder_is_refused_naming_the_layout(tmp_path: Path) -> None:
    folder = tmp_path / "tb1" / "hello-world"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text("instruction: Say hello.\n")
    (folder / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (folder / "run-tests.sh").write_text("#!/bin/bash\npytest tests\n")
    for where in (folder, folder.parent):
        with pytest.raises(TaskFileError) as refused:
            load_tasks(where)
        message = str(refused.value)
        assert "Terminal-Bench 1 task folder" in message
        assert "task.toml" in message and "instruction.md" in message and "environment/Dockerfile" in message
        assert "\n" not in message
