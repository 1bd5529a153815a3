"""Command-line paper cuts: each one a small promise, each with its test.

A missing cache under ``--offline`` and an output in a missing directory
fail clearly without creating anything; ``-q`` draws no progress bar; the
bar shows counts as whole numbers; ``--offline`` does not ask for a contact;
a semicolon-separated CSV is read; the demo's CSV reads back with ids as text.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import litfetch_df as lf
from litfetch_df import demo
from litfetch_df.cli import app as cli
from litfetch_df.frame.engine import progress
from tests.cli.support import EXPORT, one_line_error, routed, run
from tests.fake_upstream import FakeUpstream


def test_offline_with_a_missing_cache_fails_and_creates_nothing(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "typo"
    code = cli.main(
        ["run", str(export), "-o", str(tmp_path / "o.csv"), "--offline", "--cache", f"{typo}/"]
    )
    assert code == cli.EXIT_CACHE
    one_line_error(capsys.readouterr().err, "no response cache at")
    assert not typo.exists() and not (tmp_path / "o.csv").exists()


def test_an_output_in_a_missing_directory_fails_and_creates_nothing(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent-dir"
    assert cli.main(["run", str(export), "-o", str(missing / "r.csv")]) == cli.EXIT_OUTPUT
    one_line_error(capsys.readouterr().err, "no directory")
    assert not missing.exists()


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_draws_no_progress_bar(
    quiet: bool,
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(progress, "DEFAULT_DELAY", 0.0)  # any run is "long" now
    argv = ["run", str(export), "-o", str(tmp_path / "o.csv"), "--steps", "resolve"]
    assert run([*argv, "--contact", "me@lab.example", *(["-q"] if quiet else [])], world) == 0
    err = capsys.readouterr().err
    if quiet:
        assert err == ""
    else:
        assert "resolve" in err and "row" in err  # the control: the bar is drawn


def test_the_bar_shows_counts_as_whole_numbers() -> None:
    out = io.StringIO()
    with progress.Progress(20_000, desc="bodies", enabled=True, file=out) as bar:
        bar.advance(10_000, label="pmc_oa_s3")
        bar.advance(10_000, error=True)
    text = out.getvalue()
    assert "errors=10000" in text and "pmc_oa_s3=10000" in text
    assert "e+" not in text


def test_offline_does_not_ask_for_a_contact(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    demo.copy_demo_cache(cache)
    argv = ["run", str(export), "-o", str(tmp_path / "o.csv"), "--steps", "resolve,licences"]
    assert cli.main([*argv, "--offline", "--cache", str(cache)]) == 0
    err = capsys.readouterr().err
    assert "contact" not in err


def test_a_semicolon_separated_csv_is_read(
    world: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "semicolons.csv"
    path.write_text(EXPORT.replace(",", ";"), encoding="utf-8")
    frame = lf.read_table(path)
    assert list(frame.columns) == ["PMID", "Title", "PMCID", "DOI"]
    assert frame["PMID"].tolist()[:2] == ["30000001", "30000002"]
    out = tmp_path / "o.csv"
    argv = ["run", str(path), "-o", str(out), "--steps", "resolve", "-q"]
    assert run([*argv, "--contact", "me@lab.example"], world) == 0
    assert lf.read_table(out)["pmcid"].tolist()[:2] == ["PMC7000001", "PMC7000002"]
    # A comma file with a stray semicolon in a title still reads with commas.
    comma = tmp_path / "comma.csv"
    comma.write_text('PMID,Title\n1,"a; b"\n', encoding="utf-8")
    assert lf.read_table(comma)["Title"].tolist() == ["a; b"]


def test_the_demo_csv_reads_back_with_ids_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--output", "demo-result.csv", "--no-progress"]) == 0
    with (tmp_path / "demo-result.csv").open(encoding="utf-8", newline="") as handle:
        raw = list(csv.DictReader(handle))
    back = lf.read_table(tmp_path / "demo-result.csv")
    export = demo.load_demo_export()
    assert back["PMID"].tolist() == export["PMID"].tolist()
    assert back["pmid"].dropna().str.fullmatch(r"[0-9]+").all()
    assert all("." not in row["PMID"] and "." not in row["pmid"] for row in raw)
    assert isinstance(back["pmid"].dtype, pd.StringDtype)


@pytest.mark.parametrize("flag", [True, False])
def test_allow_private_network_reaches_the_session_only_when_given(
    flag: bool, world: FakeUpstream, export: Path, tmp_path: Path
) -> None:
    seen: list[dict[str, object]] = []
    routed_factory = routed(world)

    def recording(**settings: Any) -> lf.Session:
        seen.append(settings)
        return routed_factory(**settings)

    argv = ["run", str(export), "-o", str(tmp_path / "o.csv"), "--steps", "resolve", "-q"]
    argv += ["--contact", "me@lab.example"]
    code = cli.main(
        [*argv, *(["--allow-private-network"] if flag else [])], session_factory=recording
    )
    assert code == 0 and len(seen) == 1
    assert seen[0].get("allow_private_network") is (True if flag else None)


def test_the_default_session_honours_allow_private_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITFETCH_DF_ALLOW_PRIVATE_NETWORK", raising=False)

    def build(**more: bool) -> lf.Session:
        return cli._default_session(
            contact=None, cache=None, cache_ttl=None, offline=False, refresh=False, **more
        )

    assert build().bounds.allow_private_network is False
    assert build(allow_private_network=True).bounds.allow_private_network is True
