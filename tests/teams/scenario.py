"""A team of three scripted against the loopback model server, shared by the team tests.

alice asks bob for a number with ``team_message``; bob answers her the same way; carol runs a
shell command (which needs the user's approval in ask mode), claims the shared task and
completes it; each member's final answer reaches the lead, which sums them up once it has all
three. The members run in parallel, so every step names whose request takes it (``when`` /
``unless`` on the request's text): the script holds whatever order the members reach the
server in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL = "team-model"
#: Price per Mtok, so cost per member and per team is not zero.
INPUT_PRICE, OUTPUT_PRICE = 3.0, 15.0
MEMBER = "a member of the agent team"
#: In the lead's request once the team started.
LEADING = "You lead the agent team"
#: A task the lead puts on the shared list when the team starts (nobody takes it here).
TASK = "review the result"
#: The task carol adds, claims and completes.
GREET = "greet"
SUMMARY = "SUMMARY: alice found 42, bob told her, carol ran the command."


def me(name: str) -> str:
    return f'You are "{name}"'


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def team_steps() -> list[dict[str, Any]]:
    """Most specific first: a request takes the first step it matches."""
    alice = [
        {"when": [me("alice"), "MAGIC=42"], "text": "ALICE-RESULT: the number is 42"},
        {
            "when": [me("alice")],
            "unless": ["sent to bob"],
            "text": "Asking bob.",
            "tool_calls": [call("team_message", to="bob", text="bob, what is the magic number?")],
        },
        {"when": [me("alice"), "sent to bob"], "text": "Waiting for bob."},
    ]
    bob = [
        {"when": [me("bob"), "sent to alice"], "text": "BOB-RESULT: told alice the number"},
        {
            "when": [me("bob"), "what is the magic number"],
            "tool_calls": [call("team_message", to="alice", text="MAGIC=42")],
        },
        {"when": [me("bob")], "text": "Standing by."},
    ]
    carol = [
        {"when": [me("carol"), "done [carol]"], "text": "CAROL-RESULT: ran the command"},
        {
            "when": [me("carol"), "claimed [carol]"],
            "tool_calls": [call("team_tasks", action="complete", task_id=GREET, result="printed carol-was-here")],
        },
        {"when": [me("carol"), f"open: {GREET}"], "tool_calls": [call("team_tasks", action="claim", task_id=GREET)]},
        {
            "when": [me("carol"), "carol-was-here"],
            "tool_calls": [call("team_tasks", action="add", title=GREET, detail="say hello from the shell")],
        },
        {"when": [me("carol")], "tool_calls": [call("bash", command="echo carol-was-here")]},
    ]
    lead = [
        {"when": ["ALICE-RESULT", "BOB-RESULT", "CAROL-RESULT"], "unless": [MEMBER], "text": SUMMARY},
        *({"when": ["[Team "], "unless": [MEMBER], "text": "Noted."} for _ in range(8)),
    ]
    return [*alice, *bob, *carol, *lead]


def members() -> list[dict[str, Any]]:
    return [
        {"name": "alice", "instructions": "You find numbers.", "prompt": "Find the magic number; bob knows it."},
        {"name": "bob", "instructions": "You know the magic number.", "prompt": "Answer your teammates' questions."},
        {"name": "carol", "prompt": "Run the greeting command and track it on the shared task list."},
    ]


def write_config(home: Path, base_url: str) -> None:
    """A provider ``local`` on the loopback server, with prices."""
    (home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{base_url}"\nmodels = ["{MODEL}"]\n\n'
        f'[models."local/{MODEL}"]\ninput_price = {INPUT_PRICE}\noutput_price = {OUTPUT_PRICE}\n'
    )
