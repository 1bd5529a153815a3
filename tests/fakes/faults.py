"""Faults the fake can inject: a share of every host's requests fails, in a kind drawn per request.

A :class:`FaultPlan` decides from a seed, the request (host, method, path,
query) and how many times that same request was seen before, so the same
client behaviour meets the same faults in every run whatever the order its
concurrent requests arrive in, and a retry of a failed request is a fresh draw.
The kinds are the failures real services show: 500, 502 and 503 answers, a
429 without ``Retry-After``, a connection reset, a 200 whose body is cut short
and sent without ``Content-Length`` (the client cannot tell from the framing),
a 200 HTML error page where a JSON or XML answer was due, and a stall of a
couple of seconds that ends in a reset (a read timeout, bounded).
"""

from __future__ import annotations

import collections
import enum
import hashlib
import threading
from dataclasses import dataclass, field

from tests.fake_upstream import FakeResponse

__all__ = ["FaultKind", "FaultPlan", "fault_response"]


class FaultKind(enum.Enum):
    """One way a request can fail."""

    HTTP_500 = "500"
    HTTP_502 = "502"
    HTTP_503 = "503"
    THROTTLED = "429 without Retry-After"
    RESET = "connection reset"
    TRUNCATED = "truncated body without Content-Length"
    HTML_PAGE = "200 HTML error page"
    STALL = "stall then reset"


def _unit(*parts: object) -> float:
    material = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big") / 2**64


@dataclass
class FaultPlan:
    """Fail ``share`` of every host's requests (0 to 1), deterministically per ``seed``.

    ``kinds`` are the failures drawn from (all by default); ``stall`` bounds
    the seconds a :attr:`FaultKind.STALL` holds the connection.
    """

    share: float
    seed: int = 0
    kinds: tuple[FaultKind, ...] = tuple(FaultKind)
    stall: float = 2.0
    _seen: collections.Counter[tuple[str, ...]] = field(
        default_factory=collections.Counter, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"the fault share must be in [0, 1]: {self.share!r}")
        if not self.kinds:
            raise ValueError("a fault plan needs at least one kind")

    def draw(self, host: str, method: str, path: str, query: str) -> FaultKind | None:
        """Return the fault for this request (``None``: serve it), counting it as seen."""
        key = (host, method, path, query)
        with self._lock:
            attempt = self._seen[key]
            self._seen[key] += 1
        if _unit(self.seed, "fault", *key, attempt) >= self.share:
            return None
        pick = _unit(self.seed, "kind", *key, attempt)
        return self.kinds[min(len(self.kinds) - 1, int(pick * len(self.kinds)))]


_HTML = (
    b"<!DOCTYPE html><html><head><title>Service Unavailable</title></head><body>"
    b"<h1>We'll be right back</h1><p>The service is under maintenance.</p></body></html>"
)


def fault_response(kind: FaultKind, answer: FakeResponse, *, stall: float) -> FakeResponse | str:
    """Return what the fake sends for ``kind``, given the answer it would have sent.

    ``"drop"`` closes the connection unanswered (see
    :meth:`tests.fake_upstream.FakeUpstream.fail_next`); ``"stall"`` waits
    ``stall`` seconds first.
    """
    if kind is FaultKind.RESET:
        return "drop"
    if kind is FaultKind.STALL:
        return f"stall:{stall}"
    if kind is FaultKind.TRUNCATED:
        data, headers = answer.encoded()
        return FakeResponse(answer.status, data[: len(data) // 2], headers, truncated=True)
    if kind is FaultKind.HTML_PAGE:
        return FakeResponse(200, _HTML, {"Content-Type": "text/html; charset=utf-8"})
    if kind is FaultKind.THROTTLED:
        return FakeResponse(429, {"message": "Too Many Requests"})
    status = int(kind.value)
    return FakeResponse(status, f"{status} upstream error", {"Content-Type": "text/plain"})
