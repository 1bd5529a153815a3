"""Secrets (API keys in query parameters or headers) never reach a log line, an exception
message, a chained exception, ``session.failures`` or a repr."""

from __future__ import annotations

import logging

import httpx
import pytest

from litfetch_df import RetryPolicy, Session, UpstreamUnavailable
from litfetch_df.wire.http import (
    get_logger,
    is_secret_header,
    is_secret_param,
    redact_headers,
    redact_text,
    redact_url,
)
from tests.conftest import FAST_RETRY, mock_session
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response

SECRET_Q = "Q-SECRET-0b8e51"
SECRET_H = "H-SECRET-77c2d9"
SECRET_E = "E-SECRET-41aa03"
SECRETS = (SECRET_Q, SECRET_H, SECRET_E)

SPRINGER = "api.springernature.com"
ELSEVIER = "api.elsevier.com"
OPENALEX = "api.openalex.org"


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


# -- the helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"https://api.openalex.org/works?api_key={SECRET_Q}",
        f"https://api.springernature.com/meta/v2/json?q=doi:10.1000/x&api_key={SECRET_Q}&p=1",
        f"https://api.elsevier.com/content/article/doi/10.1000/x?apiKey={SECRET_Q}#frag",
        f"https://api.elsevier.com/x?insttoken={SECRET_Q}&httpAccept=text/xml",
        f"https://example.org/x?API-KEY={SECRET_Q}",
        f"https://example.org/x?access_token={SECRET_Q}",
    ],
)
def test_redact_url(url: str) -> None:
    out = redact_url(url)
    assert SECRET_Q not in out
    assert "REDACTED" in out
    assert redact_url(httpx.URL(url)) == redact_url(str(httpx.URL(url)))


def test_redact_url_keeps_ordinary_params() -> None:
    url = "https://api.crossref.org/works/10.1000/x?mailto=a%40b.org&rows=20&monkey=1"
    assert redact_url(url) == url


def test_redact_headers_and_predicates() -> None:
    headers = {"X-ELS-APIKey": SECRET_E, "x-api-key": SECRET_H, "Accept": "text/xml"}
    out = redact_headers(headers)
    assert out == {"X-ELS-APIKey": "REDACTED", "x-api-key": "REDACTED", "Accept": "text/xml"}
    assert is_secret_header("X-Api-Key") and is_secret_header("Authorization")
    assert not is_secret_header("Accept")
    assert is_secret_param("api_key") and is_secret_param("apiKey")
    assert not is_secret_param("mailto")


def test_logger_from_get_logger_redacts_messages_and_args(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = get_logger("litfetch_df.sources.example")
    log.debug("calling %s", f"https://api.openalex.org/works?api_key={SECRET_Q}")
    log.info(f"inline https://x.org/?apikey={SECRET_Q}")
    log.warning("mapping %(u)s", {"u": httpx.URL(f"https://x.org/?api_key={SECRET_Q}")})
    assert "calling https://api.openalex.org/works?api_key=REDACTED" in caplog.text
    assert_clean(caplog.text)
    assert_clean(redact_text(f"key={SECRET_Q} token={SECRET_Q}"))


# -- the session: logs ------------------------------------------------------------------------


def _keyed_calls() -> list[tuple[str, dict[str, str], dict[str, str]]]:
    return [
        (f"https://{SPRINGER}/meta/v2/json", {"q": "doi:10.1000/x", "api_key": SECRET_Q}, {}),
        (
            f"https://{ELSEVIER}/content/article/doi/10.1000/x",
            {},
            {"X-ELS-APIKey": SECRET_E, "Accept": "text/xml"},
        ),
        (f"https://{OPENALEX}/works/doi:10.1000/x", {}, {"x-api-key": SECRET_H}),
    ]


async def test_no_secret_in_debug_logs_over_mock_transport(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    statuses = iter([503, 200, 200, 200])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(statuses), json={}, request=request)

    async with mock_session(handler) as s:
        for url, params, headers in _keyed_calls():
            await s.get(url, params=params, headers=headers)
    text = caplog.text
    # the lines that would leak are really there (so this test can fail) ...
    assert "HTTP Request: GET https://api.springernature.com/meta/v2/json" in text
    assert "api_key=REDACTED" in text
    assert "retrying" in text
    # ... and carry no secret
    assert_clean(text)
    for record in caplog.records:
        assert_clean(record.getMessage())


async def test_no_secret_in_debug_logs_over_sockets(
    fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.route(SPRINGER, r"/meta/v2/json", json_response({"records": []}))
    fake.route(ELSEVIER, r"/content/article/doi/.+", FakeResponse(404, "not entitled"))
    fake.route(OPENALEX, r"/works/.+", json_response({"id": "https://openalex.org/W1"}))
    fake.fail_next(SPRINGER, "/meta/", "drop", FakeResponse(429, "slow", {"Retry-After": "0"}))
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        for url, params, headers in _keyed_calls():
            await s.get(url, params=params, headers=headers)
    assert "HTTP Request:" in caplog.text
    assert any(r.name.startswith("httpcore") for r in caplog.records)
    assert_clean(caplog.text)
    # the secrets did reach the service they belong to
    springer = fake.requests(SPRINGER)
    assert len(springer) == 3  # dropped, throttled, answered
    assert all(r.param("api_key") == SECRET_Q for r in springer)
    assert fake.requests(ELSEVIER)[0].headers["x-els-apikey"] == SECRET_E


# -- the session: exceptions, failures, repr --------------------------------------------------


async def test_upstream_unavailable_carries_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        # a transport whose error message quotes the full URL: the worst case
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    async with mock_session(handler, retry=RetryPolicy(2, 0.0, 0.0)) as s:
        with pytest.raises(UpstreamUnavailable) as info:
            await s.get(
                f"https://{SPRINGER}/meta/v2/json",
                params={"api_key": SECRET_Q},
                headers={"x-api-key": SECRET_H},
            )
        failures = s.failures
    exc = info.value
    assert SPRINGER in str(exc)
    assert "api_key=REDACTED" in str(exc)
    assert_clean(str(exc))
    assert_clean(repr(exc))
    # nothing chained (cause or context) may carry the transport's secret-bearing error
    assert _chain(exc) == [exc]
    assert exc.__cause__ is None and exc.__context__ is None
    assert_clean(" ".join(failures))
    assert_clean(caplog.text)


async def test_failures_after_exhausted_status_carry_no_secret() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text=f"busy: {request.url}", request=request)

    async with mock_session(handler) as s:
        await s.get(f"https://{OPENALEX}/works", params={"api_key": SECRET_Q})
        assert len(s.failures) == 1
        assert_clean(" ".join(s.failures))


async def test_repr_of_session_and_scope_carries_no_secret() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={}, request=request)

    s = mock_session(handler, contact="you@example.org")
    assert_clean(repr(s))
    async with s:
        async with s.scope() as sc:
            for url, params, headers in _keyed_calls():
                await sc.get(url, params=params, headers=headers)
            assert_clean(repr(sc))
            assert_clean(str(sc))
            assert "scope" in repr(sc)
        assert_clean(repr(s))
        assert "you@example.org" in repr(s)


@pytest.mark.parametrize("name", ["httpx", "httpcore.http11", "httpcore.connection"])
def test_http_library_loggers_are_redacted(name: str, caplog: pytest.LogCaptureFixture) -> None:
    Session()  # installs the filters
    caplog.set_level(logging.DEBUG)
    logging.getLogger(name).debug("GET %s", f"https://x.org/w?api_key={SECRET_Q}")
    assert "api_key=REDACTED" in caplog.text
    assert_clean(caplog.text)
