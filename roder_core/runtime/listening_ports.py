"""Ports that processes listen on in a runner, read from its ``/proc/net/tcp`` and ``tcp6``.

The kernel's own table needs no tool in the runner (no ``ss``, no ``netstat``): Roder reads the
two files there and keeps the rows in state ``0A`` (LISTEN).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LISTEN = "0A"
#: What Roder runs in the runner to read the table (a missing tcp6 file is fine).
COMMAND = ["sh", "-c", "cat /proc/net/tcp; cat /proc/net/tcp6 2>/dev/null; true"]


@dataclass(frozen=True)
class ListeningPort:
    port: int
    address: str
    family: str

    @property
    def loopback_only(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


def _address(hex_address: str) -> tuple[str, str]:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1])), "ipv4"
    # IPv6: four 32-bit words, each in host (little-endian) order
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    mapped = address.ipv4_mapped
    return (str(mapped), "ipv6") if mapped is not None else (str(address), "ipv6")


def parse(table: str) -> list[ListeningPort]:
    """Listening sockets of ``/proc/net/tcp``-format text, one per (port, address), by port."""
    found: dict[tuple[int, str], ListeningPort] = {}
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[3] != LISTEN or ":" not in fields[1]:
            continue
        hex_address, hex_port = fields[1].rsplit(":", 1)
        try:
            address, family = _address(hex_address)
            port = int(hex_port, 16)
        except ValueError:
            continue
        found.setdefault((port, address), ListeningPort(port, address, family))
    return sorted(found.values(), key=lambda p: (p.port, p.address))
