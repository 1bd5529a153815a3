"""``litfetch-df plan``: run's arguments, the per-host plan table on stdout, nothing sent.

In-process through ``cli.main(..., session_factory=...)`` with the export of
tests/cli/support.py; the factory's session is routed to the fake upstream, which
must see no request at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from litfetch_df import Session
from litfetch_df.cli import app as cli
from litfetch_df.limits import published_limit
from litfetch_df.store.quota import QuotaLedger
from tests.cli.support import routed
from tests.fake_upstream import FakeUpstream

CONTACT = ["--contact", "me@lab.example"]


def test_plan_prints_the_hosts_and_sends_nothing(
    fake: FakeUpstream,
    export: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table = tmp_path / "plan.csv"
    code = cli.main(["plan", str(export), *CONTACT, "-o", str(table)], session_factory=routed(fake))
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    assert fake.requests() == []
    # The export has a PMID-only row and a DOI-only row: the ID Converter, OpenAlex and
    # (with a contact) Unpaywall are asked; the last line totals the plan.
    for host in ("pmc.ncbi.nlm.nih.gov", "api.openalex.org", "api.unpaywall.org"):
        assert host in out
    assert out.strip().splitlines()[-1].endswith("rows would be deferred")
    written = pd.read_csv(table)
    assert list(written.columns)[:3] == ["host", "kind", "requests"]
    assert set(written["host"]) >= {"pmc.ncbi.nlm.nih.gov", "api.openalex.org"}


def test_plan_takes_runs_steps_and_contact(
    fake: FakeUpstream, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["plan", str(export), "--steps", "resolve"], session_factory=routed(fake))
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    # Resolution alone asks neither Crossref nor Unpaywall (no licences, no contact).
    assert "api.crossref.org" not in out and "api.unpaywall.org" not in out
    assert "pmc.ncbi.nlm.nih.gov" in out


def test_plan_lists_a_host_expected_to_get_under_one_request(
    fake: FakeUpstream, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two DOIs put Unpaywall's expected share (DOIs OpenAlex does not know) under half a
    # request: the host is still listed, with 0, rather than hidden from the plan.
    code = cli.main(["plan", str(export), *CONTACT], session_factory=routed(fake))
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    unpaywall = next(line for line in out.splitlines() if line.startswith("api.unpaywall.org"))
    assert unpaywall.split()[2] == "0"


def test_plan_shows_a_quota_the_ledger_says_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = published_limit("api.unpaywall.org", "single")
    assert limit is not None
    # Forty DOIs: enough that Unpaywall is expected to be asked a few times.
    export = tmp_path / "dois.csv"
    export.write_text(
        '"PMID","DOI"\n' + "".join(f',"10.1000/q.{i}"\n' for i in range(40)), encoding="utf-8"
    )

    def factory(**settings: Any) -> Session:
        # Unpaywall's day scaled to nothing: the ledger has none left to plan with.
        session = Session(quotas={("api.unpaywall.org", "single"): 0}, **settings)
        assert isinstance(session.quota, QuotaLedger) and session.quota.left(limit) == 0
        return session

    code = cli.main(["plan", str(export), *CONTACT], session_factory=factory)
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    unpaywall = next(line for line in out.splitlines() if line.startswith("api.unpaywall.org"))
    assert unpaywall.split()[5] == "0"  # quota left
    assert int(unpaywall.split()[7]) > 0  # rows deferred
