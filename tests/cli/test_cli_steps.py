"""``litfetch-df run`` step by step: which columns each ``--steps`` choice adds, the options.

Every run goes in-process through ``cli.main(..., session_factory=routed(fake))`` against
the synthetic world of tests/cli/support.py (three articles: one in the PMC OA bucket with
supplementary files, one in Europe PMC only, one closed DOI-only with a preprint).
"""

from __future__ import annotations

import _thread
import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from litfetch_df.cli import app as cli
from tests.cli.support import EXPORT, ctrl_c_on_call, one_line_error, run
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import HOST_S2

INPUT_COLUMNS = ["PMID", "Title", "PMCID", "DOI"]
TITLES = ["One", "Two", "Three"]
CONTACT = ["--contact", "me@lab.example"]

# What each step adds to the written table, in the order the steps add them. The bodies
# step's ``body`` and the files step's ``files`` hold objects and are never written.
ADDED: dict[str, list[str]] = {
    "resolve": ["pmid", "pmcid", "doi", "bookid", "resolve_error"],
    "bodies": ["body_source", "body_media_type", "body_size", "body_error"],
    "files": ["n_files", "files_error"],
    "licences": [
        "licence",
        "licence_family",
        "access",
        "oa_status",  # issue 16: one normalised open-access status per row
        "licence_basis",
        "access_basis",  # issue 15: which basis gave the access status
        "licence_error",
    ],
    "related": ["related", "n_related", "preprint_doi", "published_doi", "related_error"],
}


@pytest.fixture
def export(tmp_path: Path) -> Path:
    path = tmp_path / "pubmed.csv"
    path.write_text(EXPORT, encoding="utf-8")
    return path


def read(path: Path) -> pd.DataFrame:
    """Read a written table back (CSV and TSV cells as text, NA where empty)."""
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype="string", sep="\t" if path.suffix == ".tsv" else ",")


def cells(column: pd.Series[Any]) -> list[str | None]:
    return [None if pd.isna(v) else str(v) for v in column.tolist()]


def step_lines(err: str) -> dict[str, str]:
    """The per-step summary lines on stderr, by step name."""
    found: dict[str, str] = {}
    for line in err.splitlines():
        text = line.removeprefix(f"{cli.PROG}: ")
        name = text.split(":", 1)[0]
        if name in cli.STEPS and text != line:
            found[name] = text
    return found


def expected_line(step: str, table: pd.DataFrame, long: pd.DataFrame | None) -> str:
    """The step line the written table itself justifies."""
    n = len(table)
    if step == "resolve":
        have = ", ".join(f"{k} {table[k].notna().sum()}" for k in ("pmid", "pmcid", "doi"))
        return f"resolve: {have} of {n} rows"
    if step == "bodies":
        return f"bodies: {table['body_source'].notna().sum()} of {n} rows have a body"
    if step == "files":
        assert long is not None
        rows = (table["n_files"].astype("Int64") > 0).sum()
        return f"files: {len(long)} files listed for {rows} of {n} rows"
    if step == "licences":
        terms, statuses = table["licence_basis"].notna().sum(), table["oa_status"].notna().sum()
        return f"licences: {terms} of {n} rows have terms, {statuses} an open-access status"
    rows = (table["n_related"].astype("Int64") > 0).sum()
    return f"related: {rows} of {n} rows have a counterpart"


# -- each step alone, and some together ---------------------------------------------------------


@pytest.mark.parametrize(
    "steps",
    ["resolve", "bodies", "files", "licences", "related", "bodies,licences", "resolve,related"],
)
def test_steps_add_exactly_their_columns(
    steps: str,
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.csv"
    code = run(
        ["run", str(export), "-o", str(out), "--steps", steps, "--no-progress", *CONTACT], world
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    chosen = steps.split(",")
    table = read(out)
    assert list(table.columns) == INPUT_COLUMNS + [c for s in chosen for c in ADDED[s]]
    assert cells(table["Title"]) == TITLES  # every row, in order
    assert table[INPUT_COLUMNS].equals(read(export))  # the input's own cells untouched
    files_table = tmp_path / "out.files.csv"
    assert files_table.exists() == ("files" in chosen)
    long = read(files_table) if "files" in chosen else None

    assert f"running {', '.join(chosen)} ..." in captured.err
    lines = step_lines(captured.err)
    assert set(lines) == set(chosen)
    for step in chosen:
        assert lines[step] == expected_line(step, table, long)
    assert "no contact email" not in captured.err
    assert "total" in captured.out  # the summary goes to stdout


def test_each_step_finds_what_the_world_holds(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without resolve every step reads the ids as they stand: row 1 has only a PMID, so
    # nothing that needs its PMCID or DOI is found for it.
    out = tmp_path / "out.csv"
    argv = ["run", str(export), "-o", str(out), "--no-progress", "-q", *CONTACT]
    assert run([*argv, "--steps", "bodies,files,licences,related"], world) == 0
    table = read(out)
    assert cells(table["body_source"]) == ["pmc_oa_s3", None, None]
    assert cells(table["n_files"])[1:] == ["0", "0"] and table["n_files"].astype("Int64")[0] > 2
    assert cells(table["access"]) == ["open-access", None, "closed"]
    assert cells(table["preprint_doi"]) == [None, None, "10.1101/2026.01.05.600001"]
    long = read(tmp_path / "out.files.csv")
    assert set(cells(long["row"])) == {"0"}
    # With resolve first, row 1 gains its PMCID and with it the Europe PMC body.
    assert run([*argv, "--steps", "resolve,bodies"], world) == 0
    assert cells(read(out)["body_source"]) == ["pmc_oa_s3", "europe_pmc", None]
    assert capsys.readouterr().err == ""


# -- naming the id columns ----------------------------------------------------------------------

REFS = (
    "Ref\tAcc\tNote\nhttps://doi.org/10.1000/abc.1\t\ta\n\tPMC7000002\tb\ndoi:10.5555/xyz-9\t\tc\n"
)
NAMED = ["--doi-col", "Ref", "--pmcid-col", "Acc"]


@pytest.fixture
def refs(tmp_path: Path) -> Path:
    path = tmp_path / "refs.tsv"
    path.write_text(REFS, encoding="utf-8")
    return path


def test_named_columns_with_resolve(
    world: FakeUpstream, refs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "named.csv"
    argv = ["run", str(refs), "-o", str(out), "--steps", "resolve,bodies", "-q", *NAMED]
    code = run(argv, world)
    assert code == 0, capsys.readouterr().err
    table = read(out)
    assert list(table.columns) == ["Ref", "Acc", "Note", *ADDED["resolve"], *ADDED["bodies"]]
    assert table[["Ref", "Acc", "Note"]].equals(read(refs))  # named columns stay as they were
    assert cells(table["doi"]) == ["10.1000/abc.1", None, "10.5555/xyz-9"]
    assert cells(table["pmcid"]) == ["PMC7000001", "PMC7000002", None]
    assert cells(table["pmid"]) == ["30000001", None, None]
    assert cells(table["body_source"]) == ["pmc_oa_s3", "europe_pmc", None]


def test_named_columns_without_resolve(
    world: FakeUpstream, refs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "named.csv"
    argv = ["run", str(refs), "-o", str(out), "--steps", "bodies,related", "-q", *NAMED]
    code = run(argv, world)
    assert code == 0, capsys.readouterr().err
    table = read(out)
    # No canonical id columns without resolve; the steps read the named ones.
    assert list(table.columns) == ["Ref", "Acc", "Note", *ADDED["bodies"], *ADDED["related"]]
    assert table[["Ref", "Acc", "Note"]].equals(read(refs))
    assert cells(table["body_source"]) == [None, "europe_pmc", None]  # from Acc
    assert cells(table["preprint_doi"]) == [None, None, "10.1101/2026.01.05.600001"]  # from Ref


def test_a_named_column_wins_over_a_recognised_one(
    world: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "DOI" would be found by name; --doi-col points elsewhere, so "DOI" is just data.
    source = tmp_path / "two.csv"
    source.write_text("DOI,Cited DOI\n10.1000/abc.1,10.5555/xyz-9\n", encoding="utf-8")
    out = tmp_path / "two-out.csv"
    argv = ["run", str(source), "-o", str(out), "--steps", "related", "-q", "--doi-col"]
    code = run([*argv, "Cited DOI"], world)
    assert code == 0, capsys.readouterr().err
    table = read(out)
    assert cells(table["DOI"]) == ["10.1000/abc.1"] and cells(table["Cited DOI"]) == [
        "10.5555/xyz-9"
    ]
    assert cells(table["preprint_doi"]) == ["10.1101/2026.01.05.600001"]


# -- --bodies-dir and --files-dir ---------------------------------------------------------------


def test_bodies_dir_holds_the_bodies_the_table_points_to(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, bodies = tmp_path / "out.csv", tmp_path / "bodies"
    argv = ["run", str(export), "-o", str(out), "--steps", "resolve,bodies", "--no-progress"]
    code = run([*argv, "--bodies-dir", str(bodies)], world)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = read(out)
    added = ["body_path", "body_source", "body_media_type", "body_size", "body_error"]
    assert list(table.columns) == INPUT_COLUMNS + ADDED["resolve"] + added
    assert cells(table["body_source"]) == ["pmc_oa_s3", "europe_pmc", None]
    paths = cells(table["body_path"])
    assert paths[2] is None
    written: list[Path] = []
    for path, size in zip(paths[:2], cells(table["body_size"])[:2], strict=True):
        assert path is not None and size is not None
        assert Path(path).is_relative_to(bodies)
        data = Path(path).read_bytes()
        assert len(data) == int(size) and b"<article" in data
        written.append(Path(path))
    assert sorted(p for p in bodies.rglob("*") if p.is_file()) == sorted(written)
    assert step_lines(captured.err)["bodies"] == "bodies: 2 of 3 rows have a body"


def test_files_dir_downloads_every_listed_file(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, files = tmp_path / "out.csv", tmp_path / "files"
    argv = ["run", str(export), "-o", str(out), "--steps", "files", "--no-progress"]
    code = run([*argv, "--files-dir", str(files)], world)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = read(out)
    assert list(table.columns) == INPUT_COLUMNS + ADDED["files"]
    long = read(tmp_path / "out.files.csv")
    assert len(long) == int(table["n_files"].astype("Int64").sum()) > 0
    assert {"path", "size", "fetch_error"} <= set(long.columns)
    assert long["fetch_error"].isna().all()
    downloaded = cells(long["path"])
    assert all(p is not None for p in downloaded)
    for path, size in zip(downloaded, cells(long["size"]), strict=True):
        assert path is not None and size is not None
        assert Path(path).is_relative_to(files) and Path(path).stat().st_size == int(size)
    line = step_lines(captured.err)["files"]
    assert line == f"files: {len(long)} files listed for 1 of 3 rows, {len(long)} downloaded"


@pytest.mark.parametrize(
    ("steps", "option"),
    [("resolve,bodies,licences", "--files-dir"), ("resolve,files", "--bodies-dir")],
)
def test_a_directory_without_its_step_is_a_usage_error(
    steps: str,
    option: str,
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, directory = tmp_path / "out.csv", tmp_path / "dir"
    code = run(
        ["run", str(export), "-o", str(out), "--steps", steps, option, str(directory)], world
    )
    assert code == cli.EXIT_USAGE == 2
    one_line_error(capsys.readouterr().err, option)
    assert not out.exists() and not directory.exists()
    assert world.count() == 0  # checked before any work


# -- the cache, and offline replay --------------------------------------------------------------


def test_a_second_run_on_the_same_cache_sends_nothing(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    first, again = tmp_path / "first.csv", tmp_path / "again.csv"
    argv = ["--steps", "all", "--cache", str(cache), "--no-progress", "-q", *CONTACT]
    assert run(["run", str(export), "-o", str(first), *argv], world) == 0
    sent = world.count()
    assert sent > 0 and world.count(HOST_S2) > 0
    code = run(["run", str(export), "-o", str(again), *argv], world)
    assert code == 0, capsys.readouterr().err
    assert world.count() == sent
    assert read(first).equals(read(again))
    assert read(tmp_path / "first.files.csv").equals(read(tmp_path / "again.files.csv"))


def test_offline_replays_a_recorded_run(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    first, replay = tmp_path / "first.csv", tmp_path / "replay.csv"
    argv = ["--steps", "all", "--cache", str(cache), "--no-progress", "-q", *CONTACT]
    assert run(["run", str(export), "-o", str(first), *argv], world) == 0
    sent = world.count()
    code = run(["run", str(export), "-o", str(replay), *argv, "--offline"], world)
    assert code == 0, capsys.readouterr().err
    assert world.count() == sent
    assert read(first).equals(read(replay))
    assert read(tmp_path / "first.files.csv").equals(read(tmp_path / "replay.files.csv"))


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_offline_without_a_cache_is_a_usage_error(
    how: str,
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.csv"
    argv = ["run", str(export), "-o", str(out), "--steps", "resolve"]
    if how == "flag":
        argv.append("--offline")
    else:
        monkeypatch.setenv("LITFETCH_DF_OFFLINE", "1")
    assert run(argv, world) == cli.EXIT_USAGE
    one_line_error(capsys.readouterr().err, "--cache")
    assert not out.exists() and world.count() == 0


# -- output formats -----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".tsv"])
def test_other_formats_keep_every_row(
    suffix: str,
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"out{suffix}"
    argv = ["run", str(export), "-o", str(out), "--steps", "resolve,files,related", "-q"]
    code = run(argv, world)
    assert code == 0, capsys.readouterr().err
    table = read(out)
    assert len(table) == 3 and cells(table["Title"]) == TITLES
    assert (
        list(table.columns) == INPUT_COLUMNS + ADDED["resolve"] + ADDED["files"] + ADDED["related"]
    )
    assert cells(table["related"]) == [None, None, "preprint:10.1101/2026.01.05.600001"]
    long = read(tmp_path / f"out.files{suffix}")
    assert len(long) == int(pd.to_numeric(table["n_files"]).sum())
    assert not (tmp_path / "out.files.csv").exists()


# -- an interrupt during the downloads ----------------------------------------------------------


def test_an_interrupt_during_the_downloads_says_the_steps_finished(
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from litfetch_df.frame.engine.steps import downloads as download_step

    # The second download presses Ctrl-C and never ends.
    interrupting, calls = ctrl_c_on_call(download_step.download_file_to, 2)
    monkeypatch.setattr(download_step, "download_file_to", interrupting)
    out, files = tmp_path / "out.csv", tmp_path / "files"
    argv = ["run", str(export), "-o", str(out), "--steps", "bodies,files", "--no-progress"]
    code = run([*argv, "-q", "--concurrency", "1", "--files-dir", str(files)], world)
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED
    assert len(calls) == 2  # the steps were done: only the downloads were cut short
    table = read(out)
    assert cells(table["Title"]) == TITLES
    assert cells(table["body_source"]) == ["pmc_oa_s3", None, None]
    assert not table["body_error"].fillna("").str.contains("abandoned").any()
    long = read(tmp_path / "out.files.csv")
    assert len(long) == int(table["n_files"].astype("Int64").sum()) > 2
    assert "some file downloads did not" in err
    fetched = long["fetch_error"].fillna("").tolist()
    assert any("abandoned: interrupted" in e for e in fetched)  # the download cut short
    assert "abandoned: interrupted" not in err


def test_an_interrupt_in_a_subset_of_steps_counts_the_unfinished_rows(
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from litfetch_df.frame.engine.steps import licences as licence_step

    # The third licence call presses Ctrl-C and never ends. (The first row waits for the
    # bulk OpenAlex lookup and gives its slot to the second, which finishes at once.)
    interrupting, _ = ctrl_c_on_call(licence_step.licence_work, 3, settle=True)
    monkeypatch.setattr(licence_step, "licence_work", interrupting)
    out = tmp_path / "out.csv"
    argv = ["run", str(export), "-o", str(out), "--steps", "licences", "--no-progress", "-q"]
    code = run([*argv, "--concurrency", "1", *CONTACT], world)
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED
    table = read(out)
    assert list(table.columns) == INPUT_COLUMNS + ADDED["licences"]
    assert cells(table["Title"]) == TITLES
    stopped = [e for e in cells(table["licence_error"]) if e and "abandoned: interrupted" in e]
    assert 1 <= len(stopped) < 3
    assert f"{3 - len(stopped)} of 3 rows finished" in err


def test_an_interrupt_during_resolve_says_no_row_finished(
    world: FakeUpstream,
    export: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from litfetch_df.operations import resolution

    async def interrupting(batch: Any, http: Any) -> Any:
        _thread.interrupt_main()
        await asyncio.sleep(60)
        raise AssertionError("not reached")

    monkeypatch.setattr(resolution, "default_batch_resolver", lambda **_: interrupting)
    out = tmp_path / "out.csv"
    argv = ["run", str(export), "-o", str(out), "--steps", "resolve,bodies", "--no-progress"]
    code = run([*argv, "-q"], world)
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED
    table = read(out)
    assert list(table.columns) == INPUT_COLUMNS + ADDED["resolve"]  # bodies never started
    assert cells(table["Title"]) == TITLES
    assert all("abandoned: interrupted" in (e or "") for e in cells(table["resolve_error"]))
    assert "0 of 3 rows finished" in err
