"""One HTTP attempt within bounds: a deadline, a size cap, a redirect policy, a payload check.

The session decides when to send, how often to retry and what to cache; this
module decides what one attempt may cost and what it may bring back:

- an overall **deadline** for the attempt (sending, every redirect hop and the
  whole body), where the client's own timeout bounds only each read, so a
  server trickling a byte a second is never waited on for ever;
- a **size cap** on the decoded body, streamed and aborted as soon as it is
  passed (and refused before reading when ``Content-Length`` already says so);
- a **redirect policy**, applied hop by hop when redirects are followed: no
  hop from ``https`` to ``http``, and no hop from a public address into a
  non-public one (loopback, private, link-local, unique-local), each unless
  allowed;
- a **payload check** on every 2xx: what it declares (or plainly is) must be
  whole and of that kind.

A failed bound raises one of the exceptions below. Those worth another try
(:class:`DeadlineExceeded`, :class:`UnexpectedPayload`) are
:class:`~litfetch_df.wire.http.UpstreamUnavailable`, i.e. transport errors the
session retries and never caches; the others (:class:`BodyTooLarge`,
:class:`RedirectRefused`) would only fail the same way again, so they are
plain request errors the session gives up on at once. Their messages name a
host at most, never a URL (which may carry a key). See
docs/adr/0010-request-bounds-and-redirects.md.

(About 800 lines, over the project's 550: one attempt's bounds, decoding, framing
checks and streamed downloads share the same response-reading loop, and splitting it
is part of the layout issue's move of this module into the wire package.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeGuard, runtime_checkable

import httpx

from ..safexml.parse import declares_entities, narrow_xml, root_name
from .clock import Clock, SystemClock
from .decode import EncodingRefused, StreamDecoder
from .http import Http, Rate, UpstreamUnavailable, get_logger, is_secret_header, offers
from .netguard import PrivateNetworkRefused, guard_extensions, is_public_address

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "BodyTooLarge",
    "Bounds",
    "DeadlineExceeded",
    "Downloaded",
    "Downloader",
    "EncodingRefused",
    "HeadCheck",
    "NotServed",
    "PrivateNetworkRefused",
    "RedirectRefused",
    "Sink",
    "UnexpectedPayload",
    "UnsafePayload",
    "can_download",
    "check_payload",
    "check_redirect",
    "is_public_host",
    "send_bounded",
    "stream_bounded",
]

DEFAULT_MAX_BODY_BYTES: Final = 128 * 2**20
"""The default size cap: far above any article body or listing, far below what hurts memory."""

DEFAULT_MAX_JSON_BYTES: Final = 32 * 2**20
"""The default cap on a JSON answer: parsed JSON costs many times its size in memory, so it
stays well below the byte cap (the largest bulk answer is a few MiB)."""

DEFAULT_MAX_JSON_DEPTH: Final = 256
"""The default nesting limit of a JSON answer (real APIs nest a dozen levels at most)."""

DEADLINE_PER_TIMEOUT: Final = 4.0
"""The default deadline of one attempt, in multiples of the client's (per-read) timeout."""


class DeadlineExceeded(UpstreamUnavailable):
    """An attempt (its redirects and whole body included) outlasted its deadline; retried."""


class UnexpectedPayload(UpstreamUnavailable):
    """A 2xx that is not what it says (truncated, unparseable, an HTML page); retried."""


class BodyTooLarge(httpx.RequestError):
    """A body passed the size cap; given up at once (raise ``max_body_bytes`` to fetch it)."""


class RedirectRefused(httpx.RequestError):
    """A redirect the policy refuses; given up at once (the session's flags can allow it)."""


class UnsafePayload(httpx.RequestError):
    """A 2xx whose body is refused as unsafe to read (XML that declares entities); given up
    at once, since asking again brings the same document."""


class NotServed(Exception):
    """A file link answered with something other than a 200 and its bytes.

    Its message names the status and the host (``HTTP 404 from files.example.org``),
    never a URL; the frame's ``fetch_error`` cell shows it as is.
    """

    def __init__(self, status_code: int, host: str, detail: str = "") -> None:
        self.status_code = status_code
        self.host = host
        super().__init__(f"HTTP {status_code}{detail} from {host or 'an unnamed host'}")


log = get_logger("litfetch_df.transfer")


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one attempt may cost and where it may go.

    ``deadline`` is in seconds for the whole attempt (``None``: none);
    ``max_body_bytes`` caps the decoded body (``None``: no cap), counted while
    it is decoded; ``max_json_bytes`` and ``max_json_depth`` bound a JSON
    answer. ``allow_private_network`` lets connections go to non-public
    addresses (see :mod:`litfetch_df.wire.netguard`).
    """

    deadline: float | None = None
    max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES
    allow_private_redirects: bool = False
    allow_insecure_redirects: bool = False
    allow_private_network: bool = False
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH

    def __post_init__(self) -> None:
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(f"deadline must be positive, got {self.deadline!r}")
        if self.max_body_bytes is not None and (
            isinstance(self.max_body_bytes, bool) or self.max_body_bytes < 1
        ):
            raise ValueError(f"max_body_bytes must be a positive int, got {self.max_body_bytes!r}")
        for name in ("max_json_bytes", "max_json_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    def extensions(self) -> dict[str, Any]:
        """The request extensions every request of an attempt carries (the network guard)."""
        return guard_extensions(self.allow_private_network)


_DEFAULT_BOUNDS: Final = Bounds()

# What every request asks for: only the codings decoded here under the cap (httpx would
# also offer br and zstd when their optional decoders happen to be installed).
_ACCEPT_ENCODING: Final = "gzip, deflate"


def _build(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    params: Mapping[str, str | int] | None = None,
    headers: Mapping[str, str] | None,
    content: bytes | None = None,
    bounds: Bounds,
) -> httpx.Request:
    request = client.build_request(
        method, url, params=params, headers=headers, content=content, extensions=bounds.extensions()
    )
    if not headers or not any(k.lower() == "accept-encoding" for k in headers):
        request.headers["Accept-Encoding"] = _ACCEPT_ENCODING
    return request


async def send_bounded(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    params: Mapping[str, str | int] | None,
    headers: Mapping[str, str] | None,
    content: bytes | None,
    follow_redirects: bool,
    bounds: Bounds,
    clock: Clock | None = None,
) -> httpx.Response:
    """Make one attempt of a request within ``bounds``; return the response, its body read.

    Redirects, when followed, are followed here hop by hop (the client is
    always asked not to), so that the policy judges every hop. The deadline
    runs on ``clock`` (default: the event loop's own time).
    """
    request = _build(
        client, method, url, params=params, headers=headers, content=content, bounds=bounds
    )
    attempt = _attempt(client, request, follow_redirects, bounds)
    return await _within_deadline(attempt, request, bounds, clock)


async def _within_deadline(
    attempt: Coroutine[Any, Any, httpx.Response],
    request: httpx.Request,
    bounds: Bounds,
    clock: Clock | None,
) -> httpx.Response:
    deadline = bounds.deadline
    if deadline is None:
        return await attempt
    if clock is None or isinstance(clock, SystemClock):
        try:
            async with asyncio.timeout(deadline):
                return await attempt
        except TimeoutError:
            # Raised outside the block: the cancelled transfer must not ride along as context.
            pass
    elif (answered := await _race(attempt, clock, deadline)) is not None:
        return answered
    raise DeadlineExceeded(
        f"no whole answer within the {deadline:g}s deadline from {request.url.host}"
    )


async def _race(
    attempt: Coroutine[Any, Any, httpx.Response], clock: Clock, deadline: float
) -> httpx.Response | None:
    """Await ``attempt`` until ``clock`` has slept ``deadline``; ``None`` when it has not ended.

    The deadline on an injected clock (a test's virtual one), which the event
    loop's own timeouts cannot read.
    """
    work = asyncio.ensure_future(attempt)
    timer = asyncio.ensure_future(clock.sleep(deadline))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not work.done():
            work.cancel()
            # Wait for the transfer to close its response before saying why.
            await asyncio.gather(work, return_exceptions=True)
    if work.cancelled():
        return None
    return work.result()


async def _attempt(
    client: httpx.AsyncClient, request: httpx.Request, follow: bool, bounds: Bounds
) -> httpx.Response:
    response = await _open(client, request, follow, bounds)
    try:
        await _read_capped(response, bounds.max_body_bytes)
    except BaseException:
        await response.aclose()
        raise
    if response.is_success and response.status_code not in _NO_CONTENT:
        check_payload(response, download=follow, bounds=bounds)
    else:
        # An error answer is read too (a source may parse its JSON): only its bounds.
        problem = _json_bounds_problem(_declared(response), response.content, bounds)
        if problem is not None:
            raise UnexpectedPayload(f"{problem} from {response.request.url.host}")
    return response


async def _open(
    client: httpx.AsyncClient, request: httpx.Request, follow: bool, bounds: Bounds
) -> httpx.Response:
    """Send ``request`` (following redirects hop by hop when ``follow``); body still unread."""
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        history: list[httpx.Response] = []
        while follow and response.next_request is not None:
            hop = response.next_request
            check_redirect(response.request.url, hop.url, bounds)
            _drop_credentials(request, hop)
            if len(history) >= client.max_redirects:
                raise httpx.TooManyRedirects("too many redirects", request=hop)
            await response.aclose()
            history.append(response)
            response = await client.send(hop, stream=True, follow_redirects=False)
            response.history = list(history)
    except BaseException:
        await response.aclose()
        raise
    return response


# Statuses that carry no body by definition: nothing to check.
_NO_CONTENT: Final = frozenset({204, 205})


async def _read_capped(response: httpx.Response, cap: int | None) -> None:
    """Read ``response``'s body into it, aborting once it passes ``cap`` bytes (decoded)."""
    host = response.request.url.host
    _refuse_declared_over(response, cap, host)
    chunks: list[bytes] = []
    size = 0
    async for chunk in _decoded(response, host):
        size += len(chunk)
        if cap is not None and size > cap:
            raise BodyTooLarge(f"answer from {host} is over the cap of {cap} bytes")
        chunks.append(chunk)
    # What Response.aread() stores, gathered under the cap instead.
    response._content = b"".join(chunks)
    await response.aclose()


def _refuse_declared_over(response: httpx.Response, cap: int | None, host: str) -> None:
    if cap is not None:
        declared = response.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > cap:
            raise BodyTooLarge(f"answer of {int(declared)} bytes from {host} is over the cap")


async def _decoded(response: httpx.Response, host: str) -> AsyncIterator[bytes]:
    """Yield ``response``'s body decoded, piece by bounded piece (see :mod:`._decode`).

    The raw bytes are read with httpx's own decoding bypassed, so no coding is
    ever inflated whole; when they end, a connection that holds more bytes
    than the answer's framing said is closed (see :func:`_close_if_overrun`).
    """
    if hasattr(response, "_content"):
        # Built in process with its content (a mock transport, a replay): already whole.
        yield response.content
        return
    decoder = StreamDecoder(response.headers.get("content-encoding"), host)
    async for raw in response.aiter_raw():
        for piece in decoder.decode(raw):
            yield piece
    for piece in decoder.finish():
        yield piece
    await _close_if_overrun(response, host)


async def _close_if_overrun(response: httpx.Response, host: str) -> None:
    """Close the connection behind ``response`` if bytes past its framing wait on it.

    A server that sends more than its ``Content-Length`` said has planted the
    start of an answer to a request not yet made: httpcore would read it as
    the answer to the next request on that kept-alive connection. h11, under
    httpcore, keeps those bytes as its ``trailing_data``; the connection is
    closed here, so the pool drops it and the next request opens a new one.
    Reached through httpcore's own objects: a transport without them (a mock,
    HTTP/2) has nothing to check.
    """
    connection = _h11_connection(response)
    if connection is None:
        return
    trailing = getattr(getattr(connection, "_h11_state", None), "trailing_data", None)
    if isinstance(trailing, tuple) and trailing and trailing[0]:
        log.warning(
            "%s sent %d bytes past the end of its answer; that connection is closed",
            host,
            len(trailing[0]),
        )
        await connection.aclose()


# The attributes that lead from an httpx response stream down to httpcore's connection.
_STREAM_LINKS: Final = ("_stream", "_httpcore_stream", "_connection")


def _h11_connection(response: httpx.Response) -> Any:
    node: Any = response.stream
    for _ in range(8):
        if hasattr(node, "_h11_state") and callable(getattr(node, "aclose", None)):
            return node
        node = next((getattr(node, a) for a in _STREAM_LINKS if hasattr(node, a)), None)
        if node is None:
            return None
    return None


def _drop_credentials(first: httpx.Request, hop: httpx.Request) -> None:
    """Remove every credential header from a redirect ``hop`` to another origin than ``first``.

    httpx drops ``Authorization`` itself; the API-key headers of the services
    (``X-ELS-APIKey``, ``x-api-key``, …) it does not know.
    """
    same = (first.url.scheme, first.url.host, first.url.port) == (
        hop.url.scheme,
        hop.url.host,
        hop.url.port,
    )
    if same:
        return
    for name in [k for k in hop.headers if is_secret_header(k)]:
        del hop.headers[name]


# -- redirects ----------------------------------------------------------------------------------


def check_redirect(source: httpx.URL, target: httpx.URL, bounds: Bounds) -> None:
    """Raise :class:`RedirectRefused` unless a hop from ``source`` to ``target`` is allowed.

    Refused: ``https`` to anything else (unless ``allow_insecure_redirects``),
    and a public ``source`` to a non-public ``target`` (unless
    ``allow_private_redirects``). A non-public source may go anywhere: the
    caller chose to talk to a local service (a proxy, a test server), whose
    own redirects stay its business.
    """
    downgrade = source.scheme == "https" and target.scheme != "https"
    if downgrade and not bounds.allow_insecure_redirects:
        raise RedirectRefused(f"redirect from https to {target.scheme} refused ({target.host})")
    if (
        not bounds.allow_private_redirects
        and not is_public_host(target.host)
        and is_public_host(source.host)
    ):
        raise RedirectRefused(
            f"redirect from {source.host} to a non-public address refused ({target.host})"
        )


_LEGACY_IPV4: Final = re.compile(r"^[0-9a-fx.]+$")


def is_public_host(host: str) -> bool:
    """Return whether ``host`` may be a public address, judged without any DNS lookup.

    ``localhost`` (and ``*.localhost``) and literal addresses that are not
    globally routable (loopback, private, link-local, unique-local,
    unspecified, shared, reserved, multicast) are not public; IPv4 written the
    old ways (``127.1``, ``0x7f000001``, ``2130706433``) and IPv4-mapped IPv6
    are read as the address they name. Any other name counts as public.
    """
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name or name == "localhost" or name.endswith(".localhost"):
        return False
    address = _literal_address(name)
    if address is None:
        return True
    return is_public_address(address)


def _literal_address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])  # an IPv6 zone id names no address
    except ValueError:
        pass
    if _LEGACY_IPV4.match(name) and any(c.isdigit() for c in name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))  # libc's parse; no lookup
        except OSError:
            return None
    return None


# -- payloads -----------------------------------------------------------------------------------


def check_payload(
    response: httpx.Response, *, download: bool = False, bounds: Bounds | None = None
) -> None:
    """Raise :class:`UnexpectedPayload` unless a 2xx body is whole and what it claims to be.

    Judged from the declared ``Content-Type`` and the body's first bytes: JSON
    must parse; XML must close its root element; a PDF must start (within its
    first KiB) with ``%PDF-``; an HTML
    page is refused, unless ``download`` (a file link, which the caller checks
    against the type it was listed as). An empty body passes unless it claims
    JSON or XML. JSON (declared, or a body that starts like it) must also stay
    within ``bounds``' size and nesting limits.
    """
    limits = bounds if bounds is not None else _DEFAULT_BOUNDS
    declared = _declared(response)
    problem = _json_bounds_problem(declared, response.content, limits) or _payload_problem(
        declared, response.content, download=download
    )
    if problem is not None:
        raise UnexpectedPayload(f"{problem} from {response.request.url.host}")
    kind = _kind_of(declared, response.content)
    if not download and kind == "xml" and declares_entities(response.content, general_only=True):
        # Every parse here refuses it anyway; saying so here gives the row its reason. (A
        # parameter entity naming a DTD, as Springer's envelope has, expands no text: a
        # source that slices the document decides.)
        host = response.request.url.host
        raise UnsafePayload(f"XML that declares entities, refused, from {host}")


def _declared(response: httpx.Response) -> str:
    declared: str = response.headers.get("content-type", "")
    return declared.split(";", 1)[0].strip().lower()


def _payload_problem(
    declared: str, content: bytes, *, download: bool, whole: bool = True
) -> str | None:
    """Say how ``content`` is not a whole answer of its kind, or ``None``.

    ``whole=False``: ``content`` is the start and the end of a longer body
    (a streamed download), so JSON, which only a whole parse can judge, passes.
    """
    kind = _kind_of(declared, content)
    if kind == "json":
        return _json_problem(content) if whole else None
    if kind == "xml":
        return _xml_problem(content)
    if kind == "pdf":
        return _pdf_problem(content)
    if kind == "html" and not download:
        return "an HTML page where data was expected"
    return None


def _kind_of(declared: str, content: bytes) -> str | None:
    head = content[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if declared in {"text/html", "application/xhtml+xml"}:
        return "html"
    if declared == "application/pdf":
        return "pdf"
    if declared in {"application/json", "text/json"} or declared.endswith("+json"):
        return "json"
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    if declared in {"application/xml", "text/xml"} or declared.endswith("+xml"):
        return "html" if content and root_name(content) == "html" else "xml"
    # Only the start is re-encoded (256 bytes: whole UTF-16 and UTF-32 code units), so a
    # UTF-16 text file with a byte-order mark is not taken for XML.
    if head.startswith(b"<?xml") or narrow_xml(content[:256]).lstrip().startswith(b"<?xml"):
        return "html" if root_name(content) == "html" else "xml"
    if head.startswith(b"%pdf-"):
        return "pdf"
    return None


def _json_problem(content: bytes) -> str | None:
    try:
        json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return "JSON that does not parse (truncated?)"
    except RecursionError:  # the depth check below should have caught it first
        return "JSON nested too deep to parse"
    return None


def _json_bounds_problem(declared: str, content: bytes, bounds: Bounds) -> str | None:
    """Say how a JSON answer passes the size or nesting limit of ``bounds``, or ``None``.

    Judged before anything parses it (the parser's own recursion limit raises
    a ``RecursionError``, and wide JSON costs many times its size), for
    declared JSON and for any body that starts like JSON.
    """
    is_json = declared in {"application/json", "text/json"} or declared.endswith("+json")
    if not is_json and not content[:64].lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"[")):
        return None
    if len(content) > bounds.max_json_bytes:
        return f"JSON of {len(content)} bytes, over the JSON limit of {bounds.max_json_bytes} bytes"
    if _nested_deeper(content, bounds.max_json_depth):
        return f"JSON nested deeper than {bounds.max_json_depth} levels"
    return None


# A JSON string (brackets inside one are text), and every byte but a bracket.
_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def _nested_deeper(content: bytes, limit: int) -> bool:
    """Return whether JSON ``content`` nests more than ``limit`` arrays and objects deep.

    Without a parser and in C-speed passes: strings out, then only brackets
    kept, then the innermost pairs removed once per level. Each pass takes
    away at least one level, so what is left after ``limit`` passes nests
    deeper. Unbalanced brackets are the parser's to report.
    """
    if content.count(b"[") + content.count(b"{") <= limit:
        return False
    skeleton = _JSON_STRING.sub(b"", content).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        shorter = skeleton.replace(b"[]", b"").replace(b"{}", b"")
        if not shorter:
            return False
        if len(shorter) == len(skeleton):
            return False  # unbalanced: not JSON, which the parse says
        skeleton = shorter
    return True


# A document may end with comments, processing instructions and white space after its root.
_TRAILER: Final = re.compile(rb"(?:\s|<!--(?:(?!-->).)*-->|<\?(?:(?!\?>).)*\?>)*\Z", re.DOTALL)


def _xml_problem(content: bytes) -> str | None:
    if not content.strip():
        # Not "no body": an answer that says XML and brings none is broken (retried).
        return "an empty XML body"
    narrow = narrow_xml(content)
    name = root_name(narrow)
    if name is None:
        return "XML without a root element"
    tail = narrow[-(len(name) + 4096) :]
    end = _TRAILER.search(tail)
    body_end = tail[: end.start()] if end is not None else tail
    tag = rb"(?:[\w.\-]+:)?" + re.escape(name.encode())
    closing = re.compile(rb"</" + tag + rb"\s*>\Z")
    # "<root .../>": a document whose root has no content ends with the root itself.
    self_closed = re.compile(rb"<" + tag + rb"(?:\s[^<]*)?/>\Z")
    if closing.search(body_end) or self_closed.search(body_end):
        return None
    return "XML that stops before its root element closes (truncated?)"


def _pdf_problem(content: bytes) -> str | None:
    # Only the header: many real PDFs end in junk after their %%EOF, or lack it.
    if b"%PDF-" not in content[:1024]:
        return "not a PDF (no %PDF- header)"
    return None


# -- streamed downloads -------------------------------------------------------------------------


class Sink(Protocol):
    """Where :func:`stream_bounded` puts a body: anything with ``write(bytes)``."""

    def write(self, data: bytes, /) -> object:
        """Take the next piece of the body."""
        ...


HeadCheck = Callable[[bytes], None]
"""Judges a download's first bytes (1 KiB or more, or all of a shorter body); raises to refuse."""


@dataclass(frozen=True, slots=True)
class Downloaded:
    """What a streamed download ended with.

    ``path`` is where the body now is (only after a 200; ``None`` otherwise,
    and nothing was written); ``size`` its length in bytes and ``sha256`` its
    hex digest, both of the decoded body as written; ``host`` the host that
    gave a final status other than 200 (empty when not known).
    """

    status_code: int
    path: Path | None = None
    size: int = 0
    sha256: str | None = None
    host: str = ""


@runtime_checkable
class Downloader(Http, Protocol):
    """An :class:`~litfetch_df.wire.http.Http` that can also stream a GET's body to a file.

    :class:`~litfetch_df.Session` implements it; an ``Http`` without it is
    served by reading the body into memory and writing it afterwards.
    """

    async def download_to(
        self,
        url: str,
        path: str | Path,
        *,
        head_check: HeadCheck | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = True,
    ) -> Downloaded:
        """Stream a paced, retried GET of ``url`` into ``path``; see :meth:`Session.download_to`."""
        ...


# How much of a streamed body's start is kept for the checks (a DOCTYPE may be long), and
# how much of its end (an XML root must close there). Both are multiples of four, so a
# UTF-16 or UTF-32 body's start and end still join at a whole code unit.
_HEAD_KEPT: Final = 64 * 1024
_TAIL_KEPT: Final = 8 * 1024
# The first bytes judged before any more of the body is taken.
_HEAD_JUDGED: Final = 1024


async def stream_bounded(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str] | None,
    follow_redirects: bool,
    bounds: Bounds,
    sink: Sink,
    head_check: HeadCheck | None = None,
    clock: Clock | None = None,
) -> httpx.Response:
    """Make one bounded GET attempt, streaming a 2xx body into ``sink``; return the response.

    Every bound of :func:`send_bounded` holds: the deadline covers the whole
    transfer, the size cap aborts it as soon as it is passed, redirects are
    judged hop by hop. The body is never held whole: only its first 64 KiB
    and last 8 KiB are kept, for the checks. Its first KiB is judged before
    the rest is taken (a PDF must say ``%PDF-``; then ``head_check``, which
    raises to refuse it), and its end when it ends (an XML root must close).
    The response's own ``content`` stays empty for a 2xx; any other status's
    (short) body is read into it under the cap, as :func:`send_bounded` does.
    """
    request = _build(client, "GET", url, headers=headers, bounds=bounds)
    attempt = _stream_attempt(client, request, follow_redirects, bounds, sink, head_check)
    return await _within_deadline(attempt, request, bounds, clock)


async def _stream_attempt(
    client: httpx.AsyncClient,
    request: httpx.Request,
    follow: bool,
    bounds: Bounds,
    sink: Sink,
    head_check: HeadCheck | None,
) -> httpx.Response:
    response = await _open(client, request, follow, bounds)
    try:
        if response.is_success and response.status_code not in _NO_CONTENT:
            await _stream_capped(response, bounds.max_body_bytes, sink, head_check)
        else:
            await _read_capped(response, bounds.max_body_bytes)
    except BaseException:
        await response.aclose()
        raise
    return response


class _Sample:
    """The start and the end of a streamed body, kept for the payload checks."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.whole = True

    def add(self, chunk: bytes) -> None:
        room = _HEAD_KEPT - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - _TAIL_KEPT
        if excess > _TAIL_KEPT:  # trimmed in batches, so the copying stays linear
            del self.tail[: excess - excess % 4]
            self.whole = False

    def content(self) -> bytes:
        return bytes(self.head + self.tail)


async def _stream_capped(
    response: httpx.Response, cap: int | None, sink: Sink, head_check: HeadCheck | None
) -> None:
    host = response.request.url.host
    _refuse_declared_over(response, cap, host)
    declared = _declared(response)
    sample = _Sample()
    size = 0
    judged = False
    async for chunk in _decoded(response, host):
        size += len(chunk)
        if cap is not None and size > cap:
            raise BodyTooLarge(f"answer from {host} is over the cap of {cap} bytes")
        sample.add(chunk)
        if not judged and len(sample.head) >= _HEAD_JUDGED:
            _judge_head(declared, bytes(sample.head), host, head_check)
            judged = True
        sink.write(chunk)
    if size == 0:
        # A file link that answers 200 with nothing has not served the file (retried).
        raise UnexpectedPayload(f"an empty body from {host}")
    if not judged:
        _judge_head(declared, bytes(sample.head), host, head_check)
    problem = _payload_problem(declared, sample.content(), download=True, whole=sample.whole)
    if problem is not None:
        raise UnexpectedPayload(f"{problem} from {host}")
    response._content = b""  # the body went to the sink; an empty one says "not here"
    await response.aclose()


def _judge_head(declared: str, head: bytes, host: str, head_check: HeadCheck | None) -> None:
    if _kind_of(declared, head) == "pdf":
        problem = _pdf_problem(head)
        if problem is not None:
            raise UnexpectedPayload(f"{problem} from {host}")
    if head_check is not None:
        head_check(head)


def can_download(http: object) -> TypeGuard[Downloader]:
    """Whether ``http`` can stream a GET's body to a file (:class:`Downloader`)."""
    return offers(http, "get", "download_to")
