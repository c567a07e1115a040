"""Agent teams: named agents in child threads of a lead, a shared task list, and messages."""
