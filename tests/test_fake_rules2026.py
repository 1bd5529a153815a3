"""The fake's published 2026 rules (issue 24 part 5), on a clock passed by hand."""

from __future__ import annotations

from tests.fake_upstream import FakeRequest
from tests.fakes.rules2026 import DAY, WEEK, Rules2026, parse_quotas


def _req(
    host: str,
    path: str,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> FakeRequest:
    return FakeRequest(
        "GET", host, path, {k: [v] for k, v in (query or {}).items()}, headers or {}, b"", 0.0
    )


def _ask(rules: Rules2026, req: FakeRequest, now: float) -> tuple[int, dict[str, str]]:
    d = rules.decide(req.host, req, now)
    assert d is not None
    for gate in d.release:
        gate.release()
    if d.refusal is not None:
        return d.refusal.status, d.refusal.headers
    return 200, d.headers


OA_LIST = ("api.openalex.org", "/works", {"filter": "doi:10.1/a", "per_page": "100"})


def test_parse_quotas() -> None:
    assert parse_quotas("unpaywall=50, openalex-keyless-list=5") == {
        "unpaywall": 50,
        "openalex-keyless-list": 5,
    }


def test_openalex_keyless_budget_headers_and_429_when_spent() -> None:
    rules = Rules2026({"openalex-keyless-list": 2}, epoch=0.0)
    now = 10 * DAY + 3600.0  # 01:00 UTC
    status, headers = _ask(rules, _req(*OA_LIST), now)
    assert status == 200
    assert headers["X-RateLimit-Reset"] == str(23 * 3600)
    assert headers["x-ratelimit-cost-usd"] == "0.0001"
    assert headers["X-RateLimit-Remaining"] == "1"
    assert _ask(rules, _req(*OA_LIST), now + 1)[0] == 200
    status, headers = _ask(rules, _req(*OA_LIST), now + 2)
    assert status == 429
    assert rules.refused["openalex-budget"] == 1
    # singletons stay free when the list budget is spent
    single = _req("api.openalex.org", "/works/doi:10.1/a")
    status, headers = _ask(rules, single, now + 3)
    assert status == 200 and headers["x-ratelimit-cost-usd"] == "0.0000"
    # midnight UTC gives the day back
    assert _ask(rules, _req(*OA_LIST), 11 * DAY + 1)[0] == 200


def test_openalex_keyed_budget_is_ten_thousand_list_calls_and_per_page_capped() -> None:
    rules = Rules2026()
    keyed = _req("api.openalex.org", "/works", {"filter": "doi:x", "api_key": "k"})
    assert _ask(rules, keyed, 0.0)[1]["X-RateLimit-Limit"] == "10000"
    big = _req("api.openalex.org", "/works", {"filter": "doi:x", "per_page": "200"})
    assert _ask(rules, big, 1.0)[0] == 400


def test_openalex_or_values_and_url_length_capped() -> None:
    rules = Rules2026()
    ors = "|".join(f"10.1/{n}" for n in range(100))
    assert _ask(rules, _req("api.openalex.org", "/works", {"filter": "doi:" + ors}), 0.0)[0] == 200
    over = _req("api.openalex.org", "/works", {"filter": "doi:" + ors + "|10.1/x"})
    assert _ask(rules, over, 0.1)[0] == 400
    long = "|".join(f"10.1/{'y' * 40}.{n}" for n in range(90))  # 90 values, ~5,000 characters
    assert _ask(rules, _req("api.openalex.org", "/works", {"filter": "doi:" + long}), 0.2)[0] == 414


def test_openalex_100_per_second() -> None:
    rules = Rules2026()
    single = _req("api.openalex.org", "/works/doi:10.1/a", {"api_key": "k"})
    statuses = [_ask(rules, single, 0.0)[0] for _ in range(101)]
    assert statuses.count(200) == 100 and statuses[-1] == 429


def test_crossref_pools() -> None:
    rules = Rules2026()
    polite_list = _req("api.crossref.org", "/works", {"filter": "doi:a", "mailto": "me@x.org"})
    status, headers = _ask(rules, polite_list, 0.0)
    assert status == 200
    assert headers["x-api-pool"] == "polite-array"
    assert headers["x-rate-limit-limit"] == "3" and headers["x-concurrency-limit"] == "3"
    agent = _req("api.crossref.org", "/works/10.1/a", None, {"user-agent": "t (mailto:me@x.org)"})
    assert _ask(rules, agent, 0.0)[1]["x-api-pool"] == "polite-single"
    public = _req("api.crossref.org", "/works", {"filter": "doi:a"})
    assert _ask(rules, public, 0.0)[1]["x-api-pool"] == "public-array"
    # the public list pool allows one a second
    assert _ask(rules, public, 0.2)[0] == 429
    assert _ask(rules, public, 1.1)[0] == 200


def test_crossref_in_flight_cap() -> None:
    rules = Rules2026()
    req = _req("api.crossref.org", "/works", {"filter": "doi:a", "mailto": "me@x.org"})
    held = [rules.decide(req.host, req, 0.0) for _ in range(3)]
    assert all(d is not None and d.refusal is None for d in held)
    over = rules.decide(req.host, req, 0.0)
    assert over is not None and over.refusal is not None and over.refusal.status == 429


def test_springer_page_size_403_and_daily_quota() -> None:
    rules = Rules2026({"springer": 3})
    meta = "/meta/v2/json"
    assert _ask(rules, _req("api.springernature.com", meta, {"p": "50"}), 0.0)[0] == 403
    oa = _req("api.springernature.com", "/openaccess/jats", {"p": "25"})
    assert _ask(rules, oa, 0.0)[0] == 403
    ok = _req("api.springernature.com", meta, {"p": "25"})
    assert [_ask(rules, ok, float(i))[0] for i in range(4)] == [200, 200, 200, 429]
    assert rules.refused["springer-daily"] == 1
    assert _ask(rules, ok, DAY + 1)[0] == 200


def test_springer_default_daily_quota_is_500() -> None:
    rules = Rules2026()
    ok = _req("api.springernature.com", "/meta/v2/json", {"p": "25"})
    statuses = [_ask(rules, ok, i * 0.6)[0] for i in range(501)]
    assert statuses.count(200) == 500 and statuses[-1] == 429


def test_epmc_per_minute_window() -> None:
    rules = Rules2026()
    search = _req("www.ebi.ac.uk", "/europepmc/webservices/rest/search", {"query": "x"})
    # 10 a second for 60 s would be 600: the minute window stops it at 500
    statuses = [_ask(rules, search, i * 0.1)[0] for i in range(600)]
    assert statuses.count(200) == 500
    assert rules.refused["epmc-minute"] == 100
    assert rules.refused["epmc-second"] == 0


def test_epmc_per_second_window() -> None:
    rules = Rules2026()
    search = _req("www.ebi.ac.uk", "/europepmc/webservices/rest/search", {"query": "x"})
    statuses = [_ask(rules, search, 0.0)[0] for _ in range(11)]
    assert statuses.count(200) == 10 and rules.refused["epmc-second"] == 1


def test_elsevier_weekly_quota_shape() -> None:
    rules = Rules2026({"elsevier": 2}, epoch=1_000_000.0)
    req = _req("api.elsevier.com", "/content/article/pii/S1")
    status, headers = _ask(rules, req, 0.0)
    assert status == 200 and headers["X-RateLimit-Remaining"] == "1"
    assert headers["X-RateLimit-Reset"] == str(int(1_000_000 + WEEK))
    assert _ask(rules, req, 1.0)[0] == 200
    status, headers = _ask(rules, req, 2.0)
    assert status == 429
    assert headers["X-ELS-Status"] == "QUOTA_EXCEEDED - Quota Exceeded"
    assert "X-RateLimit-Limit" not in headers and "X-RateLimit-Remaining" not in headers
    assert "X-RateLimit-Reset" in headers
    # rolling: a week after the first call, one call is free again
    assert _ask(rules, req, WEEK + 0.5)[0] == 200


def test_unpaywall_daily_quota_and_ncbi_tiers() -> None:
    rules = Rules2026({"unpaywall": 2})
    upw = _req("api.unpaywall.org", "/v2/10.1/a", {"email": "me@x.org"})
    assert [_ask(rules, upw, float(i))[0] for i in range(3)] == [200, 200, 429]
    keyless = _req("pmc.ncbi.nlm.nih.gov", "/tools/idconv/api/v1/articles/", {"ids": "1"})
    assert [_ask(rules, keyless, 0.0)[0] for _ in range(4)].count(200) == 3
    keyed = _req("pmc.ncbi.nlm.nih.gov", "/tools/idconv/api/v1/articles/", {"api_key": "k"})
    assert [_ask(rules, keyed, 0.0)[0] for _ in range(11)].count(200) == 10


def test_world_guard_applies_rules() -> None:
    from tests.fake_upstream import FakeResponse
    from tests.fakes.world import World

    world = World([], clock=lambda: 0.0)
    world._rules = Rules2026({"unpaywall": 1})
    req = _req("api.unpaywall.org", "/v2/10.1/a", {"email": "me@x.org"})
    first = world._guarded(req.host, lambda: FakeResponse(200, {}), req)
    second = world._guarded(req.host, lambda: FakeResponse(200, {}), req)
    assert isinstance(first, FakeResponse) and first.status == 200
    assert isinstance(second, FakeResponse) and second.status == 429
    assert world.throttled["api.unpaywall.org"] == 1


def test_batch_optimal_counts_on_a_small_corpus() -> None:
    from benchmarks.corpus import generate
    from benchmarks.model import batch_optimal, published_bound

    corpus = generate(300, seed=1)
    counts = batch_optimal(corpus)
    dois = {a.doi for a in corpus.articles if a.doi}
    assert counts["api.openalex.org"] <= -(-len(dois) // 100)
    assert counts["api.crossref.org"] == 2 * counts["api.openalex.org"] or (
        counts["api.crossref.org"] >= counts["api.openalex.org"]
    )
    unknown = sum(1 for a in corpus.articles if a.doi and not a.in_openalex)
    assert counts.get("api.unpaywall.org", 0) <= unknown
    bound = published_bound(
        {"www.ebi.ac.uk": 1000, "api.openalex.org": 100, "api.springernature.com": 9},
        latency=0.05,
    )
    # Europe PMC: 10/s binds for 1,000 (two windows of 500 at 10/s, 100 s) ...
    assert abs(bound["www.ebi.ac.uk"] - 100.05) < 1e-6
    assert abs(bound["api.openalex.org"] - 1.05) < 1e-6
    # ... Springer's 100 a minute lets 9 requests go at once (a window counter, no rate)
    assert abs(bound["api.springernature.com"] - 0.05) < 1e-6
    # and past two windows' allowance the third minute binds: 1,001 need 120 s
    assert (
        abs(published_bound({"www.ebi.ac.uk": 1001}, latency=0.05)["www.ebi.ac.uk"] - 120.05) < 1e-6
    )
