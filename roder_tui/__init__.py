"""Roder's clients: the ``roder`` command line, one-shot ask mode and the Textual app."""
