"""Claude Code plugins and marketplaces: catalogs, installs, and the components they bring.

``manifest`` reads ``marketplace.json`` and ``plugin.json`` (tolerantly), ``layout`` finds a
plugin's components, ``fetch`` brings sources onto the machine, ``store`` keeps installs in the
data dir, ``enabled`` says which installed plugins apply to a folder, and ``components`` turns
them into the definitions, hooks and MCP servers the existing loaders already understand.
"""
