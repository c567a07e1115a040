"""What a client of the app server must know of the protocol apart from its models: its version
and the longest message line. A one-shot client of a running host checks the one and reads
within the other without importing pydantic or asyncio."""

from __future__ import annotations

#: Bumped when a method's or notification's shape changes incompatibly.
PROTOCOL_VERSION = "2026-11-01"
#: Longest accepted message line (64 MiB): big pastes and attachments pass, memory stays bounded.
MAX_LINE = 64 * 1024 * 1024
