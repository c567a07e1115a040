"""Roder as an Agent Client Protocol agent (``roder acp``) for editors such as Zed and Toad.

The agent is one more client of the control plane: it drives the runtime through
``LocalAppClient`` and translates notifications into ACP ``session/update`` messages.
"""
