"""Counted nouns for what Roder shows and prints, in a module with no UI imports so the
command-line subcommands (``roder plugin ...``) word counts as the app does without loading Textual."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``1 word``, ``2 words``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
