"""Hostile text for terminal-injection tests, and the scan of what reached a terminal.

The payload holds one of each kind of sequence a terminal acts on (OSC title and clipboard
writes, CSI cursor moves and screen clears, the one-byte C1 CSI, BEL, backspace, carriage
return) and each kind of character that hides or reorders text (bidi overrides and isolates,
zero-width characters, tag characters). Every sequence carries a marker, so a scan of a
terminal's raw output can tell the payload from the sequences the program draws with.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

#: Sequences a terminal would act on, each with a marker.
SEQUENCES = [
    "\x1b]0;PWNTITLE\x07",  # window title
    "\x1b]52;c;UFdOQ0xJUA==\x07",  # clipboard write ("PWNCLIP")
    "\x1b[HPWNHOME",  # cursor home
    "\x1b[2JPWNCLEAR",  # clear the screen
    "\x9b6nPWNC1",  # C1 CSI: device status report
    "\x1bP+q544e\x1b\\PWNDCS",  # DCS request
]
#: Characters that hide or reorder text.
HIDING = ["\u202ePWNRLO\u202c", "\u2066PWNISO\u2069", "zero\u200bwidth\ufeff", "tag\U000e0041\U000e0042"]
HOSTILE = "hostile: " + " ".join(SEQUENCES + HIDING) + " bs\x08\x08 cr\rPWNCR del\x7f end"
#: What each sequence looks like once made visible.
SHOWN = ["␛]0;PWNTITLE", "␛]52;c;UFdOQ0xJUA==", "<U+009B>6nPWNC1", "<U+202E>PWNRLO", "zero<U+200B>width"]


def unsafe_characters(text: str) -> list[str]:
    """Every character of ``text`` a terminal could act on or that hides text, by Unicode
    category (independent of the sanitizer's own table): controls but newline, tab and the
    carriage return of a line ending, format characters, separators, surrogates."""
    found = []
    for index, ch in enumerate(text):
        if ch in "\n\t" or (ch == "\r" and text[index + 1 : index + 2] == "\n"):
            continue
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            found.append(ch)
    return found


def payload_sequences(raw: bytes) -> list[str]:
    """What of the payload reached the terminal raw: its sequences, its C1 CSI, its hiding
    characters (UTF-8 encoded). Empty means none did."""
    text = raw.decode("utf-8", errors="replace")
    problems = []
    for sequence in SEQUENCES:
        marker = sequence.rstrip("\x07")[:6]
        if marker in text:
            problems.append(repr(marker))
    for ch in ("\x9b", "\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041", "\x7f"):
        if ch in text:
            problems.append(f"U+{ord(ch):04X}")
    return problems


def provider_config(home: Path, base_url: str) -> dict[str, str]:
    """A chat-completions provider on the loopback model server; the environment to run with."""
    (home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{base_url}"\n'
        'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TMUX")}
    env.pop("RODER_MOCK_SCRIPT", None)
    env.update(RODER_HOME=str(home), LOCAL_API_KEY="sk-local-test", RODER_NO_HOST="1")
    return env
