"""The control plane: app-server protocol, dispatcher, in-process client and transports.

Clients (the TUI, one-shot mode, stdio and WebSocket app servers, the ACP agent) drive the
runtime only through the methods and notifications defined in ``protocol``; see docs/protocol.md.
"""
