"""The ``litfetch-df`` command line, called in-process against the local fake upstream.

``main()`` takes a ``session_factory``: these tests pass one whose sessions send
every request to a :class:`~tests.fakes.world.World` served by the fake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from litfetch_df.cli import app as cli
from tests.cli.support import SECRETS, ctrl_c_on_call, one_line_error, run
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import CC_BY, HOST_CROSSREF, HOST_S2

# -- run ---------------------------------------------------------------------------------------


def test_run_every_step_writes_table_bodies_and_files(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "result.csv"
    out.parent.mkdir()  # the output's directory must exist (-o never creates one)
    bodies, files = tmp_path / "bodies", tmp_path / "files"
    code = run(
        [
            "run",
            str(export),
            "-o",
            str(out),
            "--contact",
            "me@lab.example",
            "--no-progress",
            "--bodies-dir",
            str(bodies),
            "--files-dir",
            str(files),
        ],
        world,
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = pd.read_csv(out, dtype="string")
    assert list(table["PMID"].fillna("")) == ["30000001", "30000002", ""]  # input kept
    assert list(table["pmcid"].fillna("")) == ["PMC7000001", "PMC7000002", ""]
    assert list(table["doi"]) == ["10.1000/abc.1", "10.1000/abc.2", "10.5555/xyz-9"]
    assert list(table["body_source"].fillna("")) == ["pmc_oa_s3", "europe_pmc", ""]
    assert "body" not in table.columns and "files" not in table.columns
    for path in table["body_path"].dropna():
        assert Path(path).is_file() and Path(path).is_relative_to(bodies)
    assert table.loc[0, "licence"] == CC_BY and table.loc[0, "licence_basis"] == "artifact"
    assert table.loc[2, "access"] == "closed"
    assert table.loc[2, "related"] == "preprint:10.1101/2026.01.05.600001"
    long = pd.read_csv(tmp_path / "out" / "result.files.csv", dtype="string")
    assert set(long["row"]) <= {"0", "1", "2"}
    assert len(long) == int(table["n_files"].astype("Int64").sum())
    supplementary = long[(long["row"] == "0") & (long["kind"] == "supplementary")]
    assert len(supplementary) == 2
    downloaded = long["path"].dropna()
    assert len(downloaded) > 0 and all(Path(p).is_relative_to(files) for p in downloaded)
    # Progress on stderr, the summary on stdout.
    assert "running resolve, bodies, files, licences, related" in captured.err
    assert "resolve: " in captured.err and "related: " in captured.err
    assert "resolved" in captured.out and "licence_basis" in captured.out


def test_run_steps_subset_parquet_and_named_column(
    world: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "refs.tsv"
    source.write_text("Reference\tNote\n10.1000/abc.2\tx\n", encoding="utf-8")
    out = tmp_path / "refs.parquet"
    code = run(
        ["run", str(source), "-o", str(out), "--steps", "resolve", "--doi-col", "Reference", "-q"],
        world,
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == "" and captured.err == ""
    table = pd.read_parquet(out)
    assert table.loc[0, "pmid"] == "30000002" and table.loc[0, "pmcid"] == "PMC7000002"
    assert "body_source" not in table.columns
    assert not (tmp_path / "refs.files.parquet").exists()
    assert world.count(HOST_S2) == 0


def test_recorded_run_replays_offline_and_cache_commands(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    first, again = tmp_path / "first.csv", tmp_path / "again.csv"
    steps = ["--steps", "resolve,bodies,licences", "--contact", "me@lab.example", "-q"]
    assert run(["run", str(export), "-o", str(first), "--cache", str(cache), *steps], world) == 0
    sent = world.count()
    # Offline with the default session factory: no fake, and no network either.
    code = cli.main(
        ["run", str(export), "-o", str(again), "--cache", str(cache), "--offline", *steps]
    )
    assert code == 0, capsys.readouterr().err
    assert world.count() == sent
    assert pd.read_csv(first, dtype="string").equals(pd.read_csv(again, dtype="string"))

    capsys.readouterr()
    assert cli.main(["cache", "info", str(cache)]) == 0
    info = capsys.readouterr().out
    entries = int(info.split("entries:")[1].split()[0])
    assert entries > 0 and "0 expired" in info
    assert cli.main(["cache", "clear", str(cache), "--expired"]) == 0
    assert "removed 0 expired entries" in capsys.readouterr().out
    assert cli.main(["cache", "clear", str(cache)]) == 0
    assert f"removed {entries} entries" in capsys.readouterr().out
    assert cli.main(["cache", "info", str(cache)]) == 0
    assert "entries:  0" in capsys.readouterr().out


def test_keys_come_from_the_environment_and_never_show(
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for var, value in SECRETS.items():
        monkeypatch.setenv(var, value)
    out, cache = tmp_path / "keys.csv", tmp_path / "cache"
    code = run(
        ["-vv", "run", str(export), "-o", str(out), "--cache", str(cache), "--no-progress"],
        world,
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # The keys were used: Semantic Scholar got its header, Elsevier was asked via Crossref.
    s2 = world.requests(HOST_S2)
    assert s2 and all(r.headers.get("x-api-key") == SECRETS["SEMANTIC_SCHOLAR_API_KEY"] for r in s2)
    assert world.count(HOST_CROSSREF) > 0
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for value in SECRETS.values():
        assert value not in captured.out and value not in captured.err
        assert value.encode() not in stored


def test_interrupt_writes_the_finished_rows(
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from litfetch_df.frame.engine.steps import licences as licence_step

    # The third article's licence presses Ctrl-C and never ends; the others finish.
    interrupting, _ = ctrl_c_on_call(licence_step.licence_work, 3, settle=True)
    monkeypatch.setattr(licence_step, "licence_work", interrupting)
    out = tmp_path / "partial.csv"
    code = run(
        ["run", str(export), "-o", str(out), "--no-progress", "-q", "--concurrency", "1"], world
    )
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED == 130
    assert "interrupted" in err and "Traceback" not in err
    assert "rows finished" in err and "same --cache" in err
    table = pd.read_csv(out, dtype="string")
    assert len(table) == len(pd.read_csv(export, dtype="string"))  # every row, kept in order
    errors = table["licence_error"].fillna("").tolist()
    stopped = [i for i, e in enumerate(errors) if "abandoned: interrupted" in e]
    assert stopped  # the unfinished rows say so, and a re-run retries them
    finished = table["body_source"].notna() & ~table.index.isin(stopped)
    assert finished.sum() >= 1  # rows finished before the interrupt are kept
    assert (tmp_path / "partial.files.csv").is_file()


# -- bad inputs and their exit codes -----------------------------------------------------------


def test_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", str(tmp_path / "nope.csv"), "-o", str(tmp_path / "o.csv")])
    assert code == cli.EXIT_INPUT == 3
    one_line_error(capsys.readouterr().err, "no such file")


def test_directory_as_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "in.csv"
    folder.mkdir()
    assert cli.main(["run", str(folder), "-o", str(tmp_path / "o.csv")]) == cli.EXIT_INPUT
    one_line_error(capsys.readouterr().err, "directory")


def test_undecodable_input(
    world: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "latin.csv"
    source.write_bytes('"PMID","Title"\n"30000001","Caf\xe9"\n'.encode("latin-1"))
    out = tmp_path / "o.csv"
    assert cli.main(["run", str(source), "-o", str(out)]) == cli.EXIT_DECODE == 4
    one_line_error(capsys.readouterr().err, "--encoding")
    assert not out.exists()
    # Told the right encoding, the same file runs.
    code = run(
        ["run", str(source), "-o", str(out), "--encoding", "latin-1", "--steps", "resolve", "-q"],
        world,
    )
    assert code == 0
    assert pd.read_csv(out, dtype="string").loc[0, "Title"] == "Café"


def test_no_id_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "t.csv"
    source.write_text("Title,Year\nA,2020\n", encoding="utf-8")
    assert cli.main(["run", str(source), "-o", str(tmp_path / "o.csv")]) == cli.EXIT_COLUMNS == 5
    err = capsys.readouterr().err
    one_line_error(err, "no identifier column")
    assert "--doi-col" in err


def test_unknown_column_named(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["run", str(export), "-o", str(tmp_path / "o.csv"), "--doi-col", "Nope"])
    assert code == cli.EXIT_COLUMNS
    one_line_error(capsys.readouterr().err, "'Nope'")


def test_unwritable_output(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    code = cli.main(["run", str(export), "-o", str(blocker / "out.csv")])
    assert code == cli.EXIT_OUTPUT == 6
    one_line_error(capsys.readouterr().err, "cannot write")
    folder = tmp_path / "taken.csv"
    folder.mkdir()
    assert cli.main(["run", str(export), "-o", str(folder)]) == cli.EXIT_OUTPUT
    one_line_error(capsys.readouterr().err, "directory")


def test_unwritable_bodies_dir(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    code = cli.main(
        ["run", str(export), "-o", str(tmp_path / "o.csv"), "--bodies-dir", str(blocker / "b")]
    )
    assert code == cli.EXIT_OUTPUT
    one_line_error(capsys.readouterr().err, "--bodies-dir")


@pytest.mark.parametrize(
    "extra",
    [
        ["-o", "out.xlsx"],
        ["-o", "out.csv", "--steps", "resolve,teleport"],
        ["-o", "out.csv", "--offline"],
        ["-o", "out.csv", "--encoding", "klingon-8"],
        ["-o", "out.csv", "--concurrency", "0"],
        ["-o", "out.csv", "--steps", "resolve", "--files-dir", "f"],
        [],
    ],
)
def test_usage_errors(
    extra: list[str],
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(export), *extra]) == cli.EXIT_USAGE == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()


def test_cache_info_of_a_missing_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cache", "info", str(tmp_path / "none")]) == cli.EXIT_CACHE == 7
    one_line_error(capsys.readouterr().err, "no response cache")
    assert not (tmp_path / "none").exists()  # looking does not create one


def test_unusable_cache(export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not a database" * 100)
    code = cli.main(["run", str(export), "-o", str(tmp_path / "o.csv"), "--cache", str(junk)])
    assert code == cli.EXIT_CACHE
    one_line_error(capsys.readouterr().err, "cannot use cache")


# -- help and demo -----------------------------------------------------------------------------


def test_help_texts_show_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "exit codes:" in text and "litfetch-df demo" in text
    assert cli.main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    for needle in ("--steps", "SEMANTIC_SCHOLAR_API_KEY", "LITFETCH_DF_CONTACT", "examples:"):
        assert needle in text
    assert "--api-key" not in text and "--key" not in text


def test_demo_subcommand_runs_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refuse(self: Any, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"the demo tried the network: {request.url}")

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse)
    out = tmp_path / "demo-result.csv"
    assert cli.main(["demo", "--output", str(out), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "Summary" in captured.out and "Articles" in captured.out
    assert len(pd.read_csv(out)) == 10
    assert (tmp_path / "demo-result.files.csv").is_file()


def test_an_unexpected_failure_is_one_line_and_keeps_finished_steps(
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(frame: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "files_long", broken)  # fails once run() has finished
    out = tmp_path / "partial.csv"
    code = run(["run", str(export), "-o", str(out), "--no-progress", "-q"], world)
    assert code == cli.EXIT_ERROR == 1
    one_line_error(capsys.readouterr().err, "RuntimeError: boom")
    assert "licence_basis" in pd.read_csv(out, dtype="string").columns
