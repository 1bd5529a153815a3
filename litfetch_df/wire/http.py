"""The HTTP layer: the :class:`Http` protocol sources depend on, politeness
:class:`Rate` domains, the :class:`RetryPolicy`, and secret redaction."""

from __future__ import annotations

import datetime
import email.utils
import enum
import logging
import math
import random
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, runtime_checkable

import httpx

__all__ = [
    "RETRYABLE_STATUSES",
    "SANE_WAIT",
    "BulkHttp",
    "Http",
    "QuotaDeferred",
    "Rate",
    "RetryPolicy",
    "UpstreamUnavailable",
    "can_post",
    "offers",
    "redact_url",
]

log = logging.getLogger("litfetch_df.http")  # filter attached in install_log_redaction

RETRYABLE_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})


class Rate(enum.Enum):
    """A named politeness domain: the minimum spacing of request starts to one host.

    The value is ``(min_interval_seconds, max_in_flight, domain)``; ``max_in_flight``
    ``0`` means unbounded. Key presence decides keyed / unkeyed at the call site.
    """

    # The third item keeps members with equal numbers distinct: without it Enum
    # would make OPENALEX and S2_KEYED mere aliases of NCBI_KEYED (same name, same
    # identity), which hides them from iteration and mislabels them in reprs.
    DEFAULT = (0.0, 0, "default")
    NCBI_UNKEYED = (0.34, 0, "ncbi")
    NCBI_KEYED = (0.1, 0, "ncbi-keyed")
    S2_UNKEYED = (1.0, 1, "s2")
    S2_KEYED = (0.1, 0, "s2-keyed")
    # OpenAlex publishes 100 requests/s whatever a call costs (2026; limits-2026.md §2);
    # 10/s was its pre-2026 figure, and held the free singleton detour to a tenth of it.
    OPENALEX = (0.01, 0, "openalex")
    # Europe PMC publishes 10 requests/s (and 500/min) for its REST API (2026; limits-2026.md);
    # 20/s was the library's own guess, which it probed up to and drew 429s there.
    EUROPE_PMC = (0.1, 0, "europepmc")
    CROSSREF = (0.1, 3, "crossref")
    # Elsevier's article retrieval API publishes 10 requests/s per key (and 50,000 a week).
    ELSEVIER = (0.1, 0, "elsevier")
    UNPAYWALL = (0.02, 0, "unpaywall")

    @property
    def min_interval(self) -> float:
        """Minimum seconds between request starts to one host at this rate."""
        return float(self.value[0])

    @property
    def max_in_flight(self) -> int:
        """Most requests allowed in flight to one host at once (``0``: no bound)."""
        return int(self.value[1])

    @property
    def transient_statuses(self) -> frozenset[int]:
        """Extra statuses this domain uses for "slow down": retried and never cached.

        OpenAlex answers 403 when a client goes too fast (and 429 when the daily
        budget is spent), so its 403 is transient rather than a verdict.
        """
        return _TRANSIENT_BY_DOMAIN.get(str(self.value[2]), frozenset())

    @property
    def published(self) -> bool:
        """Whether the service publishes this limit (a ceiling), not the library's guess.

        A published rate is where a host's pacing starts and a ceiling it never
        passes; an unpublished one (``DEFAULT``, and the library's own guess
        ``UNPAYWALL``) is only a ceiling, and the pace is
        learned from the host's answers (ADR 0007).
        """
        return str(self.value[2]) in _PUBLISHED_DOMAINS

    @property
    def per_second(self) -> float:
        """Requests per second this rate allows (``inf`` when unpaced)."""
        return float("inf") if self.min_interval == 0 else 1.0 / self.min_interval


_PUBLISHED_DOMAINS = frozenset(
    {"ncbi", "ncbi-keyed", "s2", "s2-keyed", "openalex", "crossref", "europepmc", "elsevier"}
)

_TRANSIENT_BY_DOMAIN: dict[str, frozenset[int]] = {"openalex": frozenset({403})}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how :meth:`Session.get` retries.

    Transport errors and statuses 429/500/502/503/504 are retried up to
    ``max_attempts`` total tries. After a transport error or a 500/502/504 the
    request waits ``uniform(0, base_delay * 2**n)`` (full jitter) capped at
    ``max_delay``. A 429/503 is the host asking every client to slow down: the
    session pauses the whole host (see ADR 0007) for the later of its
    ``Retry-After`` and a back-off of its own. A ``Retry-After`` (or an
    announced rate-limit reset) is never cut short: up to ``max_wait`` seconds
    it is waited out, and a longer one *parks* the host, failing its requests
    at once with :class:`~litfetch_df.HostParked` so a re-run picks them up.
    """

    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_wait: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        for name in ("base_delay", "max_delay", "max_wait"):
            value = getattr(self, name)
            # NaN compares false with everything, so test for it explicitly
            if not isinstance(value, int | float) or math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")

    def backoff(self, attempt: int, *, rng: random.Random | None = None) -> float:
        """Return the jittered wait before retry number ``attempt`` (0-based)."""
        # min() on the exponent first: 2**attempt for a large attempt overflows a float
        upper = min(self.max_delay, self.base_delay * (2.0 ** min(attempt, 64)))
        return (rng or random).uniform(0.0, upper)

    def delay_for(
        self, attempt: int, response: httpx.Response | None, *, now: float | None = None
    ) -> float:
        """Return the wait before retry ``attempt`` (0-based) after ``response``.

        ``response`` is ``None`` after a transport error. This is litfetch's
        per-request rule (a ``Retry-After`` capped at ``max_delay``); the
        session itself never shortens a ``Retry-After`` (see the class docstring).
        """
        if response is not None and response.status_code in (429, 503):
            after = parse_retry_after(response.headers.get("retry-after"), now=now)
            if after is not None:
                return min(after, self.max_delay)
        return self.backoff(attempt)


SANE_WAIT = 8 * 86400.0
"""The longest wait a header is believed about, in seconds.

A daily quota resets within a day and no published window is longer than a
week; a header asking for more (``1e12``, ``inf``, a date in the year 9999) is
broken, and obeying it would park the host for the session. Such a value is
treated as absent.
"""


def sane_seconds(value: float | None, header: str) -> float | None:
    """Return ``value`` if it is a finite, non-negative, believable wait; else ``None``.

    An unusable value is logged (the header's name only, never the request) and
    treated as absent, so a broken header never raises in a row.
    """
    if value is None:
        return None
    if not math.isfinite(value) or value < 0 or value > SANE_WAIT:
        log.warning("ignoring %s header with an unusable value %r", header, value)
        return None
    return value


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Return the seconds a ``Retry-After`` header asks for, or ``None`` if unusable.

    Delay-seconds that are not finite, negative or past :data:`SANE_WAIT`, and
    garbage, read as absent (logged); an HTTP date already past reads as 0.
    """
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            log.warning("ignoring a Retry-After header that is neither seconds nor a date")
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            # An HTTP date is always GMT; a naive value would otherwise read as local time.
            when = when.replace(tzinfo=datetime.UTC)
        try:
            seconds = when.timestamp() - (time.time() if now is None else now)
        except (OverflowError, ValueError, OSError):
            return None
        # A date already past means "now".
        seconds = max(0.0, seconds)
    return sane_seconds(seconds, "Retry-After")


class UpstreamUnavailable(httpx.TransportError):
    """A request that failed at the transport level after every retry.

    Its message names the host and the (redacted) URL, never a credential.
    """


class QuotaDeferred(UpstreamUnavailable):
    """A request not sent because its host's quota for the period is spent.

    The message is ``<host> daily quota, resets in <h> h <m> min`` (``weekly`` for
    a weekly quota); a row that needed it says ``deferred: <message>``. The
    ledger that decides it is :class:`~litfetch_df.store.quota.QuotaLedger`.
    """


@runtime_checkable
class Http(Protocol):
    """The one-method surface a source or resolver depends on.

    :class:`~litfetch_df.Session` implements it; a test fakes it with any
    object that has ``get`` and ``contact``.
    """

    @property
    def contact(self) -> str | None:
        """The caller's contact email (polite-pool identity), if any."""
        ...

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        """Issue a paced, retried GET and return the final response."""
        ...


@runtime_checkable
class BulkHttp(Http, Protocol):
    """An :class:`Http` that can also POST (for read-only bulk endpoints)."""

    async def post(
        self,
        url: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
    ) -> httpx.Response:
        """Issue a paced, retried, cacheable POST of a JSON body (a read, not a write)."""
        ...


def offers(obj: object, *methods: str) -> bool:
    """Whether ``obj`` has every one of ``methods``, callable, as plain attribute lookup finds it.

    Capability checks go through this rather than ``isinstance`` with a runtime
    protocol: since Python 3.12 those look attributes up statically, so a
    forwarding wrapper (one that offers what it wraps through ``__getattr__``)
    would lose every capability of what it wraps.
    """
    return all(callable(getattr(obj, name, None)) for name in methods)


def can_post(http: object) -> TypeGuard[BulkHttp]:
    """Whether ``http`` is a :class:`BulkHttp` (it can also POST)."""
    return offers(http, "get", "post")


# Names whose values are secrets, in a query string or as a header.
SECRET_PARAMS: frozenset[str] = frozenset(
    {"api_key", "apikey", "api-key", "key", "token", "access_token", "insttoken"}
)
SECRET_HEADERS: frozenset[str] = frozenset(
    {
        "x-api-key",
        "x-els-apikey",
        "x-els-insttoken",
        "authorization",
        "crossref-plus-api-token",
        "proxy-authorization",
        "cookie",
    }
)

_SECRET_IN_TEXT = re.compile(
    r"(?i)\b(api[_-]?key|apikey|key|token|access_token|insttoken)=([^&\s#\"']+)"
)


def url_with_query(url: str, params: Mapping[str, str | int] | None) -> str:
    """Return ``url`` with ``params`` appended as its query string, without parsing ``url``.

    The query is form-encoded the way ``httpx.URL(url, params=params)`` writes
    it, at a fraction of the cost (this names every logged and recorded request).
    """
    if not params:
        return url
    joiner = "&" if "?" in url else "?"
    return url + joiner + urllib.parse.urlencode([(k, str(v)) for k, v in params.items()])


def redact_text(text: str) -> str:
    """Replace the value of every ``api_key=…``-style pair in ``text`` with ``REDACTED``."""
    return _SECRET_IN_TEXT.sub(lambda m: f"{m.group(1)}=REDACTED", text)


def redact_url(url: str | httpx.URL) -> str:
    """Return ``url`` as text with secret query values replaced by ``REDACTED``."""
    return redact_text(str(url))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of ``headers`` with secret values replaced by ``REDACTED``."""
    return {k: ("REDACTED" if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def is_secret_header(name: str) -> bool:
    """Return whether a header carries a credential."""
    return name.lower() in SECRET_HEADERS


def is_secret_param(name: str) -> bool:
    """Return whether a query parameter carries a credential."""
    return name.lower() in SECRET_PARAMS


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs credentials out of a record's message and args."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            if isinstance(record.args, Mapping):
                record.args = {k: _scrub(v) for k, v in record.args.items()}
            else:
                record.args = tuple(_scrub(a) for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact_text(record.msg)
        return True


def _scrub(value: object) -> object:
    if isinstance(value, str | httpx.URL):
        return redact_text(str(value))
    return value


_FILTER = RedactingFilter()

_LOGGERS_TO_REDACT = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "litfetch_df",
)


def install_log_redaction() -> None:
    """Attach the redacting filter to the loggers that print request URLs (idempotent)."""
    # A logger's filters see only records logged on that very logger, not on its
    # children, so httpcore's per-module loggers are listed one by one.
    for name in _LOGGERS_TO_REDACT:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def get_logger(name: str) -> logging.Logger:
    """Return the named logger with credential redaction attached."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
