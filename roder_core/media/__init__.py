"""Media in conversations: the per-thread, content-addressed store and image handling."""
