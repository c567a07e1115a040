"""Handlers of the app-server methods, one module per method group (registered with ``handles``)."""
