"""Private networks stay private: no connection to a non-public address unless allowed.

A server can name any host in a redirect or a listed file URL, and a name
can resolve to anything, including ``127.0.0.1`` or an address inside the
caller's network. The literal checks of :mod:`litfetch_df.wire.transfer` see
only the name; this module judges the address itself, at the moment of
connecting, for the first request and every redirect hop alike:

1. when httpcore is about to open a TCP connection, the host is resolved
   here and every address it resolves to must be public (else
   :class:`PrivateNetworkRefused`, before any packet leaves);
2. the connection is then pinned to the first checked address, so a DNS
   answer that changes between the check and the connect (rebinding) is
   never used;
3. once connected, the peer address of the socket itself is judged again,
   whatever the transport did with step 2.

It works through httpcore's ``trace`` request extension, so any client built
on httpx's own transports is guarded, a ``client_factory``'s included; a
transport that opens no socket (``httpx.MockTransport``) has nothing to
judge. A kept-alive connection was judged when it was opened. Through a
proxy, the proxy is the address connected to: one on a private address
needs the opt-in (``allow_private_network=True``). See
docs/adr/0019-private-networks.md.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Final

import httpx

__all__ = [
    "ALLOW_PRIVATE_NETWORK_ENV",
    "PrivateNetworkRefused",
    "allow_private_network_default",
    "guard_extensions",
    "is_public_address",
]

ALLOW_PRIVATE_NETWORK_ENV: Final = "LITFETCH_DF_ALLOW_PRIVATE_NETWORK"
"""Environment variable: ``1``/``true`` lets sessions that do not say otherwise connect to
non-public addresses (an intranet mirror, a test server on ``127.0.0.1``)."""

_TRUE: Final = frozenset({"1", "true", "yes", "on"})

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class PrivateNetworkRefused(httpx.RequestError):
    """A connection to a non-public address, refused; given up at once.

    Allow it with ``Session(allow_private_network=True)`` (or the
    ``LITFETCH_DF_ALLOW_PRIVATE_NETWORK`` environment variable).
    """


def allow_private_network_default() -> bool:
    """Whether the environment allows non-public addresses (:data:`ALLOW_PRIVATE_NETWORK_ENV`)."""
    return os.environ.get(ALLOW_PRIVATE_NETWORK_ENV, "").strip().lower() in _TRUE


def is_public_address(address: Address) -> bool:
    """Return whether ``address`` is globally routable unicast (what a public server has).

    IPv4 carried inside IPv6 (mapped, 6to4, Teredo) is judged as the IPv4
    address it carries.
    """
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is not None:
            return is_public_address(inner)
        if address.teredo is not None:
            return all(is_public_address(a) for a in address.teredo)
    return address.is_global and not address.is_multicast


def _address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])  # an IPv6 zone id names no address
    except ValueError:
        return None


async def _resolve(host: str, port: int) -> list[str]:
    literal = _address(host.strip("[]"))
    if literal is not None:
        return [str(literal)]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _refused(host: str, address: str) -> PrivateNetworkRefused:
    # The host name only: the request URL may carry a key.
    return PrivateNetworkRefused(
        f"connection to {host} refused: it is the non-public address {address} "
        "(allow_private_network=True allows it)"
    )


async def _judge_connect(event: str, info: dict[str, Any]) -> None:
    if event == "connection.connect_tcp.started":
        host = str(info.get("host", ""))
        try:
            addresses = await _resolve(host, int(info.get("port") or 0))
        except OSError:
            return  # the connect fails the same way, with httpx's own error
        for text in addresses:
            address = _address(text)
            if address is None or not is_public_address(address):
                raise _refused(host, text)
        if addresses:
            # httpcore hands this very mapping to connect_tcp: connect to what was checked.
            info["host"] = addresses[0]
    elif event == "connection.connect_tcp.complete":
        stream = info.get("return_value")
        get_extra = getattr(stream, "get_extra_info", None)
        peer = get_extra("server_addr") if callable(get_extra) else None
        if isinstance(peer, tuple) and peer:
            address = _address(str(peer[0]))
            if address is None or not is_public_address(address):
                await stream.aclose()  # type: ignore[union-attr]
                raise _refused(str(peer[0]), str(peer[0]))


_GUARDED: Final[dict[str, Callable[[str, dict[str, Any]], Awaitable[None]]]] = {
    "trace": _judge_connect
}


def guard_extensions(allow_private_network: bool) -> dict[str, Any]:
    """Return the request extensions that make httpcore judge each connection it opens.

    Empty when non-public addresses are allowed.
    """
    return {} if allow_private_network else dict(_GUARDED)
