"""Provider-neutral plumbing shared by the HTTP inference engines.

``catalog`` (built-in providers, ``[providers.NAME]`` tables, per-endpoint quirks),
``model_table`` (capabilities and prices), ``sse`` (event-stream framing), ``retry`` and
``failures`` (backoff, typed errors), ``transport`` (httpx, imported lazily), ``replay`` (retried
streams without duplicates), ``engine`` (the base class dialect extensions subclass),
``selection`` and ``probe`` (which provider to use when none is chosen).
"""
