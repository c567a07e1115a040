"""Workflow definitions, placeholders, planned answers and journals: the rules every source of a
workflow (a model's plan, a file, a client's edit) is held to, and what a crash leaves on disk."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from roder_core.workflows import texts
from roder_core.workflows.journal import WorkflowJournal
from roder_core.workflows.model import (
    StepStatus,
    WorkflowDefinition,
    WorkflowError,
    WorkflowRun,
    WorkflowSource,
    WorkflowStatus,
    descendants,
    fresh_steps,
    levels,
)


def definition(*steps: dict[str, object]) -> WorkflowDefinition:
    return WorkflowDefinition.model_validate({"name": "t", "steps": list(steps)})


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}], "used twice"),
        ([{"id": "a", "prompt": "x", "depends_on": ["b"]}], "unknown step 'b'"),
        ([{"id": "a", "prompt": "x", "depends_on": ["a"]}], "depends on itself"),
        (
            [{"id": "a", "prompt": "x", "depends_on": ["b"]}, {"id": "b", "prompt": "y", "depends_on": ["a"]}],
            "cycle",
        ),
        ([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y", "inputs": ["a"]}], "does not run before it"),
        ([{"id": "A b", "prompt": "x"}], "lowercase letters"),
        ([{"id": "a", "prompt": "x", "run": "ls"}], "exactly one of prompt"),
        ([{"id": "a"}], "exactly one of prompt"),
        ([{"id": "a", "prompt": "x", "depends-on": []}], "Extra inputs are not permitted"),
        ([{"id": "a", "run": "ls", "score": [" "]}], "score command is empty"),
    ],
)
def test_bad_definitions_are_refused_saying_why(steps: list[dict[str, object]], message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        definition(*steps)
    assert message in str(refused.value)


def test_levels_inputs_and_descendants() -> None:
    d = definition(
        {"id": "a", "prompt": "x"},
        {"id": "b", "run": "ls"},
        {"id": "c", "prompt": "join", "depends_on": ["a", "b"]},
        {"id": "d", "prompt": "last", "depends_on": ["c"], "inputs": ["a", "c"]},
    )
    assert levels(d) == [["a", "b"], ["c"], ["d"]]
    assert d.step("c").input_ids == ["a", "b"] and d.step("d").input_ids == ["a", "c"]
    assert d.step("b").kind == "script" and d.step("a").kind == "agent"
    assert descendants(d, "a") == {"c", "d"} and descendants(d, "d") == set()
    with pytest.raises(WorkflowError):
        d.step("nope")


def test_outputs_in_commands_are_one_quoted_argument(tmp_path: Path) -> None:
    hostile = "x'; touch pwned; echo '$(touch pwned2)\n"
    command = texts.score_command("printf %s {step.a} {output} {unknown} > out", {"a": hostile}, "ok\n\n", "g")
    assert "{unknown}" in command
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
    assert (tmp_path / "out").read_text() == hostile.rstrip("\n") + "ok{unknown}"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    long = texts.step_command(definition({"id": "a", "run": "echo {step.a}"}).step("a"), {"a": "y" * 20_000}, "")
    printed = subprocess.run(["bash", "-c", long], capture_output=True, text=True, check=True).stdout
    assert len(printed) < texts.MAX_COMMAND_INPUT + 100 and "cut" in printed


def test_outputs_stay_data_inside_the_templates_own_quotes(tmp_path: Path) -> None:
    """A template that quotes a placeholder itself ("{step.a}", '{step.a}'): pasted in, even a
    shell-quoted value would be code there; a variable reference is not."""
    hostile = "x'; touch pwned; echo \"$(touch pwned2)`touch pwned3`\" ' \n touch pwned4"
    for template in ('printf "[%s]" "{step.a}" > out', "printf '[%s]' '{step.a}' > out", "printf [%s] {step.a} > out"):
        command = texts.step_command(definition({"id": "a", "run": template}).step("a"), {"a": hostile}, "")
        subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
        assert not list(tmp_path.glob("pwned*")), (template, command)
        assert (tmp_path / "out").read_text() == f"[{hostile.rstrip(chr(10))}]", template


def test_an_agent_prompt_gets_its_inputs_and_the_instruction() -> None:
    d = definition({"id": "a", "prompt": "x"}, {"id": "b", "prompt": "use {step.a} for {goal}", "depends_on": ["a"]})
    prompt = texts.step_prompt(d.step("b"), {"a": "A-OUT"}, goal="the goal", agent_prompt="You help.", instruction="faster")
    assert prompt.startswith("You help.") and "use A-OUT for the goal" in prompt
    assert "### a\nA-OUT" in prompt and "Instruction for this run:\nfaster" in prompt


def test_a_planned_answer_is_read_from_prose_or_a_fence_and_checked() -> None:
    plan = {"name": "p", "steps": [{"id": "a", "prompt": "x"}]}
    assert texts.parse_plan(json.dumps(plan)).name == "p"
    assert texts.parse_plan(f"Here it is:\n```json\n{json.dumps(plan)}\n```\nDone.").steps[0].id == "a"
    with pytest.raises(ValueError, match="no JSON object"):
        texts.parse_plan("I cannot do that")
    with pytest.raises(ValueError, match="does not parse"):
        texts.parse_plan('{"name": "p", "steps": [}')
    with pytest.raises(ValueError, match=r"steps\.0\.id"):
        texts.parse_plan('{"name": "p", "steps": [{"id": "Bad Id", "prompt": "x"}]}')


def test_the_journal_folds_back_and_a_torn_last_line_is_dropped(tmp_path: Path) -> None:
    journal = WorkflowJournal(tmp_path / "wf")
    d = definition({"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y", "depends_on": ["a"]})
    run = WorkflowRun(definition=d, source=WorkflowSource(kind="client"), cwd=str(tmp_path), steps=fresh_steps(d))
    journal.create(run)
    state = run.state("a").model_copy(update={"status": StepStatus.COMPLETED, "output": "A-OUT", "thread_id": "thr_1"})
    journal.step(run, state)
    run.status = WorkflowStatus.RUNNING
    journal.status(run)
    path = journal.path(run.id)
    with path.open("ab") as handle:  # a kill in the middle of writing a record
        handle.write(b'{"at": 1, "kind": "step", "step": {"id": "b", "sta')
    loaded = journal.load(run.id)
    assert loaded.status is WorkflowStatus.RUNNING and loaded.state("a").output == "A-OUT"
    assert loaded.state("b").status is StepStatus.PENDING
    run.status = WorkflowStatus.PAUSED
    journal.status(run)  # the torn line is cut off before the next record
    lines = path.read_text().splitlines()
    assert all(json.loads(line) for line in lines) and json.loads(lines[-1])["status"] == "paused"
    assert journal.load(run.id).status is WorkflowStatus.PAUSED
    with pytest.raises(WorkflowError, match="no workflow"):
        journal.load("wf_missing")
    with pytest.raises(WorkflowError, match="invalid workflow id"):
        journal.path("../escape")


def test_one_process_at_a_time_runs_a_workflow(tmp_path: Path) -> None:
    first, second = WorkflowJournal(tmp_path), WorkflowJournal(tmp_path)
    first.claim("wf_1")
    assert second.held_elsewhere("wf_1") and not first.held_elsewhere("wf_1")
    with pytest.raises(WorkflowError, match="another Roder process"):
        second.claim("wf_1")
    first.release("wf_1")
    assert not second.held_elsewhere("wf_1")
    second.claim("wf_1")
    second.close()
