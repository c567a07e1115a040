"""First run: no provider is configured. Say how to set one up, offer the offline mock model."""

from __future__ import annotations

from roder_ext_tui.segments import home_relative
from textual.binding import Binding

from roder_tui.screens.whole_screen import WholeScreenQuestion

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


class FirstRunScreen(WholeScreenQuestion):
    """Dismisses with ``"mock"`` (continue with the mock model) or ``"quit"``."""

    BINDINGS = [
        Binding("enter,m", "choose('mock')", "Use the mock model"),
        Binding("q,escape", "choose('quit')", "Quit"),
    ]
    TITLE_TEXT = "Welcome to Roder"
    KEYS = (("enter", "continue with the mock model"), ("q", "quit"))
    KEYS_ID = "first-run-keys"

    def __init__(self, config_file: str) -> None:
        super().__init__()
        self.config_file = config_file

    def body(self) -> str:
        return FIRST_RUN_TEXT.format(config=home_relative(self.config_file))
