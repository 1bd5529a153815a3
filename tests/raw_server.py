"""An HTTP/1.1 server on 127.0.0.1 written on raw asyncio sockets, for hostile answers.

The fake upstream (``tests/fake_upstream.py``) speaks correct HTTP through the
standard library; this one sends exactly the bytes a test gives it, in one
write, so a test can plant what no well-behaved server would: a body longer
than its ``Content-Length``, stacked content codings, a missing ``Location``.
Runs in the test's own event loop; kept-alive connections are served until
the client closes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

Answer = Callable[[str], bytes]
"""Maps a request's path to the raw bytes sent back (status line, headers and body)."""


def http_answer(
    body: bytes, *, status: str = "200 OK", headers: dict[str, str] | None = None
) -> bytes:
    """Return a whole HTTP/1.1 answer with a correct ``Content-Length`` (unless given)."""
    fields = {"Content-Type": "text/plain", "Content-Length": str(len(body)), **(headers or {})}
    head = "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


class RawServer:
    """``async with RawServer(answer) as server``: ``server.port``, and what it saw.

    ``connections`` counts accepted connections, ``paths`` the request paths in
    the order they arrived.
    """

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.paths: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                path = head.split(b" ", 2)[1].decode()
                self.paths.append(path)
                writer.write(self.answer(path))
                await writer.drain()
        finally:
            writer.close()
