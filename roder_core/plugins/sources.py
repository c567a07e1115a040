"""Extensions made from the enabled plugins, again each time plugins change.

Kept apart from ``plugins.enabled``: this names ``kernel.extension``, and ``plugins.enabled``
is read by the subagent catalogue that ``kernel.tools`` names, so the protocol there would close
an import circle.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from roder_core.kernel.extension import RoderExtension
from roder_core.plugins.enabled import ActivePlugins


@runtime_checkable
class PluginExtensionSource(Protocol):
    """An extension whose services come from the enabled plugins (their hooks and monitors, their
    process extensions): it makes one extension per thing plugins contribute. Its ``create`` makes
    the first set from the plugins enabled at start; after each plugin change
    ``Runtime.plugins_changed`` asks for the set again and installs it through the same door
    (``kernel.distribution.admit``). ``current`` is the set it made last; an unchanged part is
    the same object again, so its process keeps running. Called in a worker thread (it may start
    processes and wait for their handshake). ``plugin_parts`` as for ``PluginAware``."""

    plugin_parts: frozenset[str]
    current: list[RoderExtension]

    def plugin_extensions(self, active: ActivePlugins) -> list[RoderExtension]: ...

    def refused(self, extension: RoderExtension, reason: str) -> None:
        """The registry did not admit ``extension`` (a capability the profile denies, a tool
        named like another's): stop what it started (the next plugin change may offer it again)."""
