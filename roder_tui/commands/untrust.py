"""``roder untrust [PATH]``: stop loading a folder's own config, hooks, skills, commands, agents."""

from roder_tui.commands.trust import add_arguments
from roder_tui.commands.trust import run_untrust as run

__all__ = ["add_arguments", "run"]
