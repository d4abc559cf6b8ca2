"""Who is on the other end: the client's IP address and the replies it is streaming.

Per-visitor limits alone are no limit, since anyone can mint visitors; these key
the limits by client address instead. Behind a reverse proxy every peer is the
proxy, so `X-Forwarded-For` is read, but only from the proxies the operator
trusts: from anyone else the header is a claim the client makes about itself.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

from fastapi import HTTPException, Request, status

from bot.errors import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ClientAddresses:
    def __init__(self, trusted_proxies: list[str]) -> None:
        try:
            self.trusted: list[Network] = [
                ipaddress.ip_network(item, strict=False) for item in trusted_proxies
            ]
        except ValueError as error:
            raise ConfigError(f"channels.web.trusted_proxies: {error}") from error

    def client_ip(self, request: Request) -> str:
        """The address limits are counted by: the peer, or the last untrusted hop it forwarded for."""
        peer = request.client.host if request.client is not None else "unknown"
        forwarded = request.headers.get("x-forwarded-for")
        if forwarded is None or not self._trusted(peer):
            return peer
        # Each proxy appends the address it received from; walk back past our own proxies.
        for hop in reversed([item.strip() for item in forwarded.split(",")]):
            if not self._trusted(hop):
                return hop if _is_address(hop) else peer
        return peer

    def _trusted(self, address: str) -> bool:
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(parsed in network for network in self.trusted)


class StreamSlot:
    """One open reply stream of a client; `close` is safe to call more than once."""

    def __init__(self, slots: StreamSlots, ip: str) -> None:
        self._slots = slots
        self._ip: str | None = ip

    def close(self) -> None:
        if self._ip is not None:
            self._slots.release(self._ip)
            self._ip = None

    async def aclose(self) -> None:
        """`close` as the response's background task. Starlette sends a plain function to
        a worker thread: that costs a thread hop per reply, and would change the counts
        beside the event loop's own `open`."""
        self.close()


class StreamSlots:
    """At most `per_ip` replies streaming at once to one client address (in this process)."""

    def __init__(self, per_ip: int) -> None:
        self.per_ip = per_ip
        self._open: Counter[str] = Counter()

    def open(self, ip: str) -> StreamSlot:
        if self._open[ip] >= self.per_ip:
            raise HTTPException(
                status.HTTP_429_TOO_MANY_REQUESTS,
                f"Too many replies are streaming to your address at once (limit: {self.per_ip}). "
                "Wait for one to finish.",
                headers={"Retry-After": "1"},
            )
        self._open[ip] += 1
        return StreamSlot(self, ip)

    def release(self, ip: str) -> None:
        self._open[ip] -= 1
        if self._open[ip] <= 0:
            del self._open[ip]

    def streaming(self, ip: str) -> int:
        return self._open[ip]


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
