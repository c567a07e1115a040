"""First run: no provider is configured. Say how to set one up, offer the offline mock model."""

from __future__ import annotations

from rich.text import Text
from roder_ext_tui.segments import home_relative
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

FIRST_RUN_TEXT = """\
No model provider is configured yet.

Use a hosted model: store its key once, then start roder again:
  roder providers login anthropic
(or openai, openrouter, ...: any provider in `roder providers list`), or set a key in the environment:
  export ANTHROPIC_API_KEY=...
  export OPENAI_API_KEY=...

Or a local model (Ollama, vLLM, LM Studio): add to {config}:
  [providers.local]
  dialect = "chat-completions"
  base_url = "http://127.0.0.1:11434/v1"
  models = ["qwen2.5-coder"]
and set provider = "local" at the top of the file.

Meanwhile you can try Roder with the offline mock model: it answers predictably and never leaves this machine.\
"""


class FirstRunScreen(ModalScreen[str]):
    """Dismisses with ``"mock"`` (continue with the mock model) or ``"quit"``.

    It is the whole screen (nothing of the app shows around it, as in Claude Code's onboarding):
    the text scrolls in the middle, the keys stay docked at the bottom, on screen at every size
    down to 40x20."""

    BINDINGS = [
        Binding("enter,m", "choose('mock')", "Use the mock model"),
        Binding("q,escape", "choose('quit')", "Quit"),
    ]
    DEFAULT_CSS = """
    FirstRunScreen { align: center middle; background: $background; }
    FirstRunScreen > Vertical {
        width: 100%; max-width: 84; height: auto; max-height: 100%;
        background: $surface; border: round $primary; padding: 0 1;
    }
    FirstRunScreen VerticalScroll { height: auto; max-height: 1fr; }
    FirstRunScreen #first-run-keys { dock: bottom; height: auto; margin-top: 1; }
    """

    def __init__(self, config_file: str) -> None:
        super().__init__()
        self.config_file = config_file

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Welcome to Roder"
            yield Static(self._keys(), id="first-run-keys")
            with VerticalScroll():
                yield Static(FIRST_RUN_TEXT.format(config=home_relative(self.config_file)), markup=False)

    @staticmethod
    def _keys() -> Text:
        keys = Text()
        keys.append(" enter ", style="bold reverse")
        keys.append(" continue with the mock model\n")
        keys.append("   q   ", style="bold reverse")
        keys.append(" quit")
        return keys

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
