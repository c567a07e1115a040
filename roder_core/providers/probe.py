"""A fast, synchronous look at a local model server: is it up, and which models does it serve?

Used only when Roder has to pick a provider or a model by itself (no config, no key, no
``--model``), before any event loop runs, so it is stdlib ``http.client`` with a short timeout:
a closed loopback port answers "refused" in microseconds, a live server in milliseconds.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

PROBE_TIMEOUT = 0.5


def probe_model_ids(url: str, timeout: float = PROBE_TIMEOUT) -> list[str] | None:
    """Model ids from an OpenAI-style ``GET .../models`` at ``url``; None when unreachable."""
    import http.client  # only when Roder must look for a local server

    parts = urlsplit(url)
    if not parts.hostname:
        return None
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = conn_class(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("GET", parts.path or "/", headers={"accept": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            return None
        data = json.loads(response.read(1 << 20))
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        connection.close()
    rows = data.get("data", []) if isinstance(data, dict) else []
    return [str(row["id"]) for row in rows if isinstance(row, dict) and row.get("id")]
