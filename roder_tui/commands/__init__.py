"""One module per ``roder`` subcommand group, each with ``add_arguments`` and ``run``."""
