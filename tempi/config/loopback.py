"""Whether a listening address is this machine's own: servers that hand out secrets or
decrypted data refuse any other bind without authentication."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
