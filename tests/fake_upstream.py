"""A local fake of the upstream services, on 127.0.0.1, for tests over real sockets.

The server dispatches on the request's ``Host`` header and path, so the
library keeps using the real upstream URLs; :meth:`FakeUpstream.client_factory`
builds an ``httpx.AsyncClient`` whose transport sends every request to the
fake instead of the network. Each service's handlers live in ``tests/fakes/``.

Features: per-host latency, per-host rate limits enforced the way real
services do (429 with an optional ``Retry-After``), scripted failures, and a
thread-safe log of every request received.
"""

from __future__ import annotations

import collections
import contextlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass
class FakeRequest:
    """One request as the fake received it."""

    method: str
    host: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float

    def param(self, name: str) -> str | None:
        """Return the first value of query parameter ``name``, if present."""
        values = self.query.get(name)
        return values[0] if values else None

    def json(self) -> Any:
        """Return the body parsed as JSON."""
        return json.loads(self.body)


@dataclass
class FakeResponse:
    """What a handler returns. ``body`` may be bytes, text, or a JSON-able object."""

    status: int = 200
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    truncated: bool = False
    """Send the body without ``Content-Length`` and close the connection after it (a cut-short
    answer the client can only spot by reading it)."""

    def encoded(self) -> tuple[bytes, dict[str, str]]:
        headers = dict(self.headers)
        body = self.body
        if isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
        else:
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        return data, headers


Handler = Callable[[FakeRequest], "FakeResponse | str | None"]
"""A route: a response, ``"drop"`` (close unanswered), ``"stall:<seconds>"`` (wait, then
close unanswered), or ``None`` (let an earlier route answer)."""


@dataclass
class _Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler


@dataclass
class _Limit:
    per_second: float
    retry_after: str | None
    window: collections.deque[float] = field(default_factory=collections.deque)


class FakeUpstream:
    """A threaded HTTP server that impersonates upstream hosts on loopback."""

    def __init__(self) -> None:
        self._routes: dict[str, list[_Route]] = collections.defaultdict(list)
        self._latency: dict[str | None, float] = {}
        self._limits: dict[str, _Limit] = {}
        self._failures: dict[tuple[str, str], collections.deque[FakeResponse | str]] = {}
        self._lock = threading.Lock()
        self.log: list[FakeRequest] = []
        self.throttled: list[FakeRequest] = []
        self._in_flight: dict[str, int] = collections.defaultdict(int)
        self.max_in_flight: dict[str, int] = collections.defaultdict(int)
        self._holds: dict[str, tuple[int, threading.Event, float]] = {}
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _serve(self) -> None:
                fake._handle(self)

            do_GET = do_POST = do_HEAD = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeUpstream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    # -- configuration -----------------------------------------------------------------------

    def route(
        self, host: str, path: str, handler: Handler | FakeResponse, *, method: str = "GET"
    ) -> None:
        """Serve ``method`` requests to ``host`` whose path fully matches regex ``path``.

        Later routes win over earlier ones, so a test can override a default.
        """
        func: Handler = _constant(handler) if isinstance(handler, FakeResponse) else handler
        self._routes[host].insert(0, _Route(method, re.compile(path), func))

    def latency(self, seconds: float, host: str | None = None) -> None:
        """Delay every response (or one host's) by ``seconds``."""
        self._latency[host] = seconds

    def rate_limit(self, host: str, per_second: float, *, retry_after: str | None = None) -> None:
        """Answer 429 to requests beyond ``per_second`` in any one-second window."""
        self._limits[host] = _Limit(per_second, retry_after)

    def hold_until_overlap(self, host: str, in_flight: int, timeout: float = 30.0) -> None:
        """Hold each answer to ``host`` until ``in_flight`` of its requests were in flight at once.

        From then on every request is answered at once. A client that never has
        that many requests out at once waits ``timeout`` seconds (real time: a
        safety valve for a broken client, not a measure) per request.
        """
        self._holds[host] = (in_flight, threading.Event(), timeout)

    def fail_next(self, host: str, path_prefix: str, *outcomes: FakeResponse | str) -> None:
        """Script the next outcomes for requests to ``host`` whose path starts with the prefix.

        An outcome is a :class:`FakeResponse` or the string ``"drop"`` (close the
        connection without answering: a transport error).
        """
        with self._lock:
            self._failures.setdefault((host, path_prefix), collections.deque()).extend(outcomes)

    # -- inspection --------------------------------------------------------------------------

    def requests(self, host: str | None = None, path: str | None = None) -> list[FakeRequest]:
        """Return the logged requests, optionally filtered by host and path prefix."""
        with self._lock:
            items = list(self.log)
        return [
            r
            for r in items
            if (host is None or r.host == host) and (path is None or r.path.startswith(path))
        ]

    def count(self, host: str | None = None, path: str | None = None) -> int:
        """Return how many requests matched :meth:`requests`."""
        return len(self.requests(host, path))

    def reset_log(self) -> None:
        with self._lock:
            self.log.clear()
            self.throttled.clear()

    # -- client side -------------------------------------------------------------------------

    def transport(self) -> httpx.AsyncBaseTransport:
        """Return an httpx transport that sends every request to this fake."""
        return loopback_transport(self.port)

    def client_factory(
        self, *, clock: Any = None, **kwargs: Any
    ) -> Callable[[], httpx.AsyncClient]:
        """Return a ``client_factory`` for :class:`litfetch_df.Session` routed to this fake.

        With ``clock`` (a virtual clock), requests are answered in process, without
        sockets or threads, and latency is slept on that clock: a test driven by it
        gives the same answer however busy the machine is.
        """

        def factory() -> httpx.AsyncClient:
            kwargs.setdefault("timeout", 10.0)
            transport = self.transport() if clock is None else _InProcess(self, clock)
            return httpx.AsyncClient(transport=transport, **kwargs)

        return factory

    # -- server side -------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        host = (h.headers.get("Host") or "").split(":")[0].lower()
        req = FakeRequest(
            method=h.command,
            host=host,
            path=parsed.path,
            query=urllib.parse.parse_qs(parsed.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
            at=time.monotonic(),
        )
        response, delay = self._arrive(req)
        try:
            if delay:
                time.sleep(delay)
        finally:
            self._leave(host)
        if isinstance(response, str) and response.startswith("stall:"):
            time.sleep(float(response.split(":", 1)[1]))
            response = "drop"
        if response == "drop":
            h.close_connection = True
            with contextlib.suppress(OSError):
                h.connection.shutdown(2)
            return
        assert isinstance(response, FakeResponse)
        data, headers = response.encoded()
        h.send_response(response.status)
        for k, v in headers.items():
            h.send_header(k, v)
        if response.truncated:
            h.send_header("Connection", "close")
            h.close_connection = True
        else:
            h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command == "HEAD":
            return
        if response.truncated:
            with contextlib.suppress(OSError):
                h.wfile.write(data)
        else:
            h.wfile.write(data)

    def _arrive(self, req: FakeRequest) -> tuple[FakeResponse | str, float]:
        """Log ``req`` as in flight and decide its answer; return it and the latency to add."""
        host = req.host
        with self._lock:
            self.log.append(req)
            self._in_flight[host] += 1
            self.max_in_flight[host] = max(self.max_in_flight[host], self._in_flight[host])
            hold = self._holds.get(host)
            if hold is not None and self._in_flight[host] >= hold[0]:
                hold[1].set()
        if hold is not None:
            hold[1].wait(hold[2])
        try:
            response = self._respond(req)
        except BaseException:
            self._leave(host)
            raise
        return response, self._latency.get(host, self._latency.get(None, 0.0))

    def _leave(self, host: str) -> None:
        with self._lock:
            self._in_flight[host] -= 1

    def _respond(self, req: FakeRequest) -> FakeResponse | str:
        with self._lock:
            for (host, prefix), queue in self._failures.items():
                if host == req.host and req.path.startswith(prefix) and queue:
                    return queue.popleft()
            limit = self._limits.get(req.host)
            if limit is not None:
                window = limit.window
                while window and req.at - window[0] >= 1.0:
                    window.popleft()
                if len(window) >= limit.per_second:
                    self.throttled.append(req)
                    headers = {"Retry-After": limit.retry_after} if limit.retry_after else {}
                    return FakeResponse(429, {"message": "Too Many Requests"}, headers)
                window.append(req.at)
        for route in self._routes.get(req.host, ()):
            if route.method == req.method and route.pattern.fullmatch(req.path):
                result = route.handler(req)
                if result is not None:
                    return result
        return FakeResponse(404, f"no fake route for {req.method} {req.host}{req.path}")


class _InProcess(httpx.AsyncBaseTransport):
    """Answers from a :class:`FakeUpstream`'s routes in process, on a virtual clock."""

    def __init__(self, fake: FakeUpstream, clock: Any) -> None:
        self._fake = fake
        self._clock = clock

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fake = self._fake
        body = await request.aread()
        host = request.url.host.lower()
        req = FakeRequest(
            method=request.method,
            host=host,
            path=request.url.path,
            query=urllib.parse.parse_qs(request.url.query.decode(), keep_blank_values=True),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            at=self._clock.now(),
        )
        response, delay = fake._arrive(req)
        try:
            if delay:
                await self._clock.sleep(delay)
        finally:
            fake._leave(host)
        if isinstance(response, str) and response.startswith("stall:"):
            await self._clock.sleep(float(response.split(":", 1)[1]))
            response = "drop"
        if response == "drop":
            raise httpx.RemoteProtocolError("connection closed without an answer", request=request)
        assert isinstance(response, FakeResponse)
        data, headers = response.encoded()
        if response.truncated:
            raise httpx.RemoteProtocolError("body cut short", request=request)
        return httpx.Response(response.status, headers=headers, content=data, request=request)


def _constant(response: FakeResponse) -> Handler:
    def handler(_req: FakeRequest) -> FakeResponse:
        return response

    return handler


def loopback_transport(port: int) -> httpx.AsyncBaseTransport:
    """An httpx transport that sends every request to a fake on ``127.0.0.1:port``.

    The real URL's Host header is kept, so the fake can tell the services apart.
    """
    return _ToFake(port)


class _ToFake(httpx.AsyncBaseTransport):
    def __init__(self, port: int) -> None:
        self._port = port
        self._inner = httpx.AsyncHTTPTransport(retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        original = request.url
        request.url = original.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        try:
            return await self._inner.handle_async_request(request)
        finally:
            request.url = original

    async def aclose(self) -> None:
        await self._inner.aclose()


def json_response(obj: Any, status: int = 200, **headers: str) -> FakeResponse:
    """Return a JSON :class:`FakeResponse`."""
    return FakeResponse(status, obj, dict(headers))


def xml_response(data: bytes | str, status: int = 200) -> FakeResponse:
    """Return an XML :class:`FakeResponse`."""
    raw = data.encode() if isinstance(data, str) else data
    return FakeResponse(status, raw, {"Content-Type": "application/xml"})


def hosts(requests: Iterable[FakeRequest]) -> collections.Counter[str]:
    """Count requests per host."""
    return collections.Counter(r.host for r in requests)
