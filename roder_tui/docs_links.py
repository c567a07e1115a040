"""Where a message sends a user to read more: a page of the published documentation.

A path such as ``docs/providers.md`` names a file of the repository, which an installed wheel
does not have; every message names the page by its address instead, built here from the
package's Documentation URL (``pyproject.toml`` ``[project.urls]``; a test keeps the two equal).
No UI imports: the command-line subcommands and one-shot mode word their hints with it too.
"""

from __future__ import annotations

#: The package's Documentation URL: the ``docs`` folder of the repository on GitHub.
DOCS_URL = "https://github.com/roder-agent/roder/tree/main/docs"


def docs_page(page: str) -> str:
    """The address of one page (``providers.md``) of the documentation."""
    return f"{DOCS_URL}/{page}"
