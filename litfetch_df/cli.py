"""``litfetch-df``: the command line for batch jobs outside notebooks.

Subcommands:

* ``run INPUT -o OUTPUT``: read a table of articles (CSV, TSV, Parquet or a
  PubMed export), run the chosen steps (resolve, bodies, files, licences,
  related) and write the result as CSV, TSV or Parquet;
* ``text INPUT -o OUTPUT.parquet``: every row's body read as text, a text
  corpus in Parquet (:mod:`litfetch_df.cli_text`);
* ``plan INPUT``: what ``run`` with the same arguments would ask, per host
  (requests, time, share of today's quota, rows deferred); no request is sent;
* ``demo``: the offline demo on bundled real articles (:mod:`litfetch_df.demo`);
* ``cache info DIR`` / ``cache clear DIR``: inspect or empty a response cache.

Credentials are read only from environment variables, never from the command
line (where they would land in shell history and process listings). Progress
goes to stderr; the summary to stdout.

Exit codes (also in ``litfetch-df --help``):

====  =====================================================================
0     success
1     an unexpected error (one line on stderr; ``-v`` shows the traceback)
2     usage error (bad option or value)
3     the input file is missing or cannot be read
4     the input file cannot be decoded or parsed (wrong ``--encoding``?)
5     no identifier column found, or a named column does not exist
6     an output file or directory cannot be written
7     the response cache cannot be used (or, for ``cache``, does not exist)
130   interrupted (Ctrl-C); the rows that finished were written, the others
      marked ``abandoned: interrupted``
141   stdout was closed early (e.g. piped into ``head``)
====  =====================================================================

(About 1,000 lines: the argument parsers and the ``run`` / ``plan`` checks they share
sit together until the layout issue splits the subcommands into a package; ``text``'s
body is already in :mod:`litfetch_df.cli_text`.)
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import copy
import dataclasses
import datetime as dt
import logging
import math
import os
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, Protocol

import pandas as pd

from . import frame as _frame  # noqa: F401  (importing it registers the .lit accessor)
from ._http import redact_text
from ._netguard import ALLOW_PRIVATE_NETWORK_ENV
from ._results import OUTPUT_FORMATS, flatten_result, output_format, summary_text, write_result
from ._version import __version__
from .cache import FILE_NAME, ResponseCache
from .cli_text import add_text_parser, long_path, needs_fetch, text_outputs
from .frame.accessor import LitFrameAccessor
from .frame.bridge import Interrupted, run_sync
from .frame.columns import CANONICAL, detect_id_columns
from .frame.cost import format_plan, plan_costs
from .frame.options import CACHE_ENV, CONTACT_ENV, ENV_CREDENTIALS, OFFLINE_ENV
from .frame.pipeline import files_long, is_abandoned
from .frame.readers import read_table
from .session import Session

__all__ = [
    "EXIT_CACHE",
    "EXIT_COLUMNS",
    "EXIT_DECODE",
    "EXIT_ERROR",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "OUTPUT_FORMATS",
    "STEPS",
    "SessionFactory",
    "build_parser",
    "flatten_result",
    "main",
    "summary_text",
    "write_result",
]

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_INPUT: Final = 3
EXIT_DECODE: Final = 4
EXIT_COLUMNS: Final = 5
EXIT_OUTPUT: Final = 6
EXIT_CACHE: Final = 7
EXIT_INTERRUPTED: Final = 130
EXIT_PIPE: Final = 141

STEPS: Final[tuple[str, ...]] = ("resolve", "bodies", "files", "licences", "related")
"""The steps of ``run``, in the order they always run."""

PROG: Final = "litfetch-df"

_TRUE: Final = frozenset({"1", "true", "yes", "on"})


class SessionFactory(Protocol):
    """Builds the :class:`Session` a ``run`` uses (tests route it to a fake upstream)."""

    def __call__(
        self,
        *,
        contact: str | None,
        cache: str | os.PathLike[str] | None,
        cache_ttl: float | None,
        offline: bool,
        refresh: bool,
    ) -> Session:
        """Return a not-yet-entered session configured with these settings."""
        ...


class CliError(Exception):
    """A failure the user can act on: a one-line message and an exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- the parser --------------------------------------------------------------------------------

_MAIN_EPILOG = f"""\
examples:
  {PROG} demo                                   # offline demo on bundled real articles
  {PROG} run pubmed.csv -o result.csv --contact you@lab.example
  {PROG} run refs.parquet -o out.parquet --steps resolve,licences --cache ~/.cache/lf
  {PROG} cache info ~/.cache/lf

exit codes:
  0 ok, 1 unexpected error, 2 usage error, 3 input missing/unreadable,
  4 input undecodable/unparseable, 5 no id column / unknown column,
  6 output not writable, 7 cache unusable, 130 interrupted (finished rows written),
  141 stdout closed early (e.g. '| head')

Run '{PROG} <command> --help' for the options of a command.
"""

_RUN_DESCRIPTION = """\
Read a table of articles, run the chosen steps for every row and write the result.

INPUT may be CSV (.csv), TSV (.tsv, .tab), Parquet (.parquet) or a PubMed
export (Save -> CSV as .csv, MEDLINE/.nbib text as .txt/.nbib, PubMed XML as
.xml). Identifier columns are found by name (PMID, PubMed ID, PMCID, PMC ID,
DOI, doi_url, NBK, ...); name them with --pmid-col etc. when they are not.
Every original column is kept; the steps add canonical pmid/pmcid/doi/bookid
columns and their own (body_source, licence, oa_status, n_files, related, ...),
each with an <step>_error column for rows that failed.
"""

_RUN_EPILOG = f"""\
steps (always run in this order; default: all):
  resolve   fill missing PMID / PMCID / DOI (NCBI ID Converter, Europe PMC, OpenAlex)
  bodies    full-text XML per article (PMC Open Access, Europe PMC, publisher APIs)
  files     list each article's file-set (body renditions, supplementary material);
            the list goes to <output stem>.files.<suffix>, one row per file
  licences  licence, raw access terms and one oa_status per row (gold, hybrid,
            bronze, green, closed: Unpaywall's; from the body, else Unpaywall)
  related   preprint / published counterparts (bioRxiv, Crossref)

output:
  The suffix of OUTPUT chooses the format: .csv, .tsv or .parquet (needs pyarrow:
  pip install 'litfetch_df[parquet]'). Bodies are never written into the table:
  give --bodies-dir to save them as files (the table then has body_path); give
  --files-dir to download every listed file as well.

credentials (environment variables only; never on the command line):
  NCBI_API_KEY, ELSEVIER_API_KEY, SPRINGER_API_KEY, SPRINGER_META_API_KEY,
  SEMANTIC_SCHOLAR_API_KEY, OPENALEX_API_KEY
  contact email: --contact or {CONTACT_ENV} (needed for Unpaywall; polite pools)
  cache: --cache or {CACHE_ENV};  offline: --offline or {OFFLINE_ENV}=1

examples:
  {PROG} run pubmed.csv -o result.csv --contact you@lab.example
  {PROG} run pubmed.csv -o result.parquet --bodies-dir bodies/ --cache .lf-cache
  {PROG} run refs.tsv -o out.csv --steps resolve --doi-col "DOI link"
  {PROG} run pubmed.csv -o again.csv --cache .lf-cache --offline   # replay, no network

Re-running with the same --cache costs no request for what already finished,
so an interrupted run (Ctrl-C writes what finished, exit code 130) resumes.
"""


def _steps(text: str) -> tuple[str, ...]:
    names = {part.strip().lower() for part in text.split(",") if part.strip()}
    if "all" in names:
        return STEPS
    unknown = sorted(names - set(STEPS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown step(s) {', '.join(unknown)}; choose from {','.join(STEPS)}"
        )
    if not names:
        raise argparse.ArgumentTypeError(f"name at least one of {','.join(STEPS)}")
    return tuple(step for step in STEPS if step in names)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of days, got {text}")
    return value


def _encoding(text: str) -> str:
    try:
        codecs.lookup(text)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {text!r}") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """Return the ``litfetch-df`` argument parser (all subcommands)."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Resolve identifiers, fetch full text, list file-sets and report licences "
            "for a whole table of scholarly articles."
        ),
        epilog=_MAIN_EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log what happens on stderr (-vv: every request); show tracebacks",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # -v is accepted after the command too; SUPPRESS keeps an absent one from resetting it.
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )

    run = commands.add_parser(
        "run",
        parents=[verbose],
        help="run the pipeline on a table of articles",
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EPILOG,
        formatter_class=formatter,
    )
    run.add_argument("input", metavar="INPUT", help="the table to read (see above)")
    run.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUTPUT",
        help="where to write (.csv/.tsv/.parquet)",
    )
    run.add_argument(
        "--steps",
        type=_steps,
        default=STEPS,
        metavar="LIST",
        help=f"comma-separated steps to run (default: {','.join(STEPS)})",
    )
    run.add_argument("--bodies-dir", metavar="DIR", help="save each body as a file in DIR")
    run.add_argument(
        "--files-dir", metavar="DIR", help="download every listed file into DIR (files step)"
    )
    run.add_argument(
        "--contact",
        metavar="EMAIL",
        help=f"your email for the polite pools and Unpaywall (default: ${CONTACT_ENV})",
    )
    run.add_argument(
        "--cache",
        metavar="DIR",
        help=f"keep upstream answers in DIR so a re-run costs nothing (default: ${CACHE_ENV})",
    )
    run.add_argument(
        "--cache-ttl",
        type=_days,
        metavar="DAYS",
        help="serve cached answers up to DAYS old (default: 30)",
    )
    run.add_argument(
        "--offline", action="store_true", help="answer only from --cache; send no request"
    )
    run.add_argument(
        "--refresh", action="store_true", help="ignore cached answers (still record new ones)"
    )
    run.add_argument(
        "--allow-private-network",
        action="store_true",
        help="let requests reach loopback and private addresses (an intranet mirror; default: "
        f"${ALLOW_PRIVATE_NETWORK_ENV})",
    )
    run.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="articles in flight at once (default: 32; per-host rate limits still apply)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    run.add_argument(
        "-q", "--quiet", action="store_true", help="no step lines on stderr, no summary on stdout"
    )
    for kind, label in (
        ("pmid", "PMIDs"),
        ("pmcid", "PMCIDs"),
        ("doi", "DOIs"),
        ("bookid", "NBK ids"),
    ):
        run.add_argument(
            f"--{kind}-col", metavar="NAME", help=f"the column holding {label} (default: by name)"
        )
    run.add_argument(
        "--encoding",
        type=_encoding,
        default="utf-8",
        metavar="ENC",
        help="text encoding of INPUT (default: utf-8, BOM or not), e.g. latin-1, cp1252",
    )

    add_text_parser(commands, [verbose])

    # plan takes run's arguments (so a run command line can be priced by changing one word);
    # OUTPUT is optional there: where the plan table goes as CSV.
    plan = commands.add_parser(
        "plan",
        parents=[verbose],
        help="show what run would ask of each host, sending nothing",
        description="Print, per host and kind of request, what `run` with the same "
        "arguments would ask: requests, estimated time, share of today's quota and rows "
        "that would be deferred. No request is sent.",
    )
    # Copies of run's own actions (argparse has no public way to share them): a shared
    # action made optional here would be optional for run too.
    for action in run._actions:
        if action.dest in ("help", "verbose"):
            continue
        clone = copy.copy(action)
        if clone.dest == "output":
            clone.required = False
            clone.help = "also write the plan table to OUTPUT as CSV"
        plan._add_action(clone)

    demo = commands.add_parser(
        "demo",
        parents=[verbose],
        help="run the whole pipeline offline on bundled real articles",
        description=(
            "Run resolve, bodies, file-sets, licences and relations on a small bundled "
            "PubMed-style export of real articles, replaying recorded upstream answers: "
            "no network, no keys, no contact needed. Prints a summary and a table."
        ),
        epilog=f"example:\n  {PROG} demo --output demo-result.csv\n",
        formatter_class=formatter,
    )
    demo.add_argument("--output", metavar="FILE", help="also write the result (.csv/.tsv/.parquet)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")

    cache = commands.add_parser(
        "cache",
        help="inspect or empty a response cache",
        description="Inspect or empty a response cache made by --cache.",
        epilog=(
            f"examples:\n  {PROG} cache info .lf-cache\n  {PROG} cache clear .lf-cache --expired\n"
        ),
        formatter_class=formatter,
    )
    cache_commands = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    info = cache_commands.add_parser(
        "info", help="count entries, size and age", formatter_class=formatter, parents=[verbose]
    )
    info.add_argument("dir", metavar="DIR", help="the cache directory (or its .sqlite3 file)")
    info.add_argument(
        "--ttl", type=_days, metavar="DAYS", help="judge expiry by DAYS (default: 30)"
    )
    clear = cache_commands.add_parser(
        "clear",
        help="delete entries (all, or only expired ones)",
        formatter_class=formatter,
        parents=[verbose],
    )
    clear.add_argument("dir", metavar="DIR", help="the cache directory (or its .sqlite3 file)")
    clear.add_argument("--expired", action="store_true", help="delete only expired entries")
    clear.add_argument(
        "--ttl", type=_days, metavar="DAYS", help="with --expired: older than DAYS (default: 30)"
    )
    return parser


# -- output ------------------------------------------------------------------------------------


def _format_of(path: str | os.PathLike[str]) -> str:
    try:
        return output_format(path)
    except ValueError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None


# -- checks before any work --------------------------------------------------------------------


def _has_cache(path: Path) -> bool:
    """Whether ``path`` is a response-cache file or a directory holding one."""
    return (path / FILE_NAME).is_file() if path.is_dir() else path.is_file()


def _check_writable_dir(directory: Path, what: str) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".litfetch-df-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CliError(EXIT_OUTPUT, f"cannot write {what} {directory}: {_os_reason(exc)}") from None


def _check_output(path: Path) -> None:
    fmt = _format_of(path)
    if path.is_dir():
        raise CliError(EXIT_OUTPUT, f"cannot write output {path}: it is a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(EXIT_OUTPUT, f"cannot write output {path}: permission denied")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        # A typo in the path must not leave new directories behind.
        raise CliError(EXIT_OUTPUT, f"cannot write output {path}: no directory {parent}")
    _check_writable_dir(parent, "into directory")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CliError(
                EXIT_OUTPUT,
                "writing Parquet needs pyarrow: pip install 'litfetch_df[parquet]'",
            ) from None


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _read_input(path: Path, encoding: str) -> pd.DataFrame:
    if path.is_dir():
        raise CliError(EXIT_INPUT, f"cannot read {path}: it is a directory")
    try:
        return read_table(path, encoding=encoding)
    except FileNotFoundError:
        raise CliError(EXIT_INPUT, f"cannot read {path}: no such file") from None
    except ImportError:
        raise CliError(
            EXIT_INPUT, f"cannot read {path}: Parquet needs pyarrow (pip install pyarrow)"
        ) from None
    except OSError as exc:
        raise CliError(EXIT_INPUT, f"cannot read {path}: {_os_reason(exc)}") from None
    except UnicodeError:
        raise CliError(
            EXIT_DECODE, f"{path}: not valid {encoding} text; try e.g. --encoding latin-1"
        ) from None
    except (ValueError, pd.errors.ParserError) as exc:
        if isinstance(exc.__cause__, UnicodeError):
            raise CliError(
                EXIT_DECODE, _one_line(str(exc)).replace("encoding=", "--encoding ")
            ) from None
        message = _one_line(str(exc))
        unsupported = "cannot read" in message or "no suffix" in message or "Excel" in message
        code = EXIT_INPUT if unsupported else EXIT_DECODE
        raise CliError(code, message if str(path) in message else f"{path}: {message}") from None


def _one_line(text: str) -> str:
    return " ".join(redact_text(text).split())


# -- the run -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _State:
    """What a run has finished so far (read after an interrupt or a failure)."""

    frame: pd.DataFrame
    files: pd.DataFrame | None = None
    done: bool = False


@dataclasses.dataclass(frozen=True)
class _Run:
    session: Session
    common: Mapping[str, Any]
    explicit: Mapping[str, Any]
    bodies_dir: Path | None
    files_dir: Path | None


async def _run_all(
    run: _Run, state: _State, steps: Sequence[str], say: Callable[[str], None]
) -> None:
    """Every step in one ``df.lit.run()`` pass, then the file downloads, in one session."""
    async with run.session:
        say(f"running {', '.join(steps)} ...")
        lit = LitFrameAccessor(state.frame)
        state.frame = await lit.run_async(
            steps=steps, out_dir=run.bodies_dir, **run.common, **run.explicit
        )
        state.done = True  # every step is in the frame; only the downloads may remain
        if "files" in steps:
            state.files = files_long(state.frame)
            if run.files_dir is not None and len(state.files):
                fetch = LitFrameAccessor(state.files).fetch_files_async
                state.files = await fetch(run.files_dir, **run.common)
        for step in steps:
            say(_step_line(step, state.frame, state))


def _count(frame: pd.DataFrame, column: str) -> int:
    return int(frame[column].notna().sum()) if column in frame.columns else 0


def _step_line(step: str, frame: pd.DataFrame, state: _State) -> str:
    n = len(frame)
    if step == "resolve":
        have = ", ".join(f"{k} {_count(frame, k)}" for k in ("pmid", "pmcid", "doi"))
        text = f"resolve: {have} of {n} rows"
        column = "resolve_error"
    elif step == "bodies":
        text = f"bodies: {_count(frame, 'body_source')} of {n} rows have a body"
        column = "body_error"
    elif step == "files":
        files = len(state.files) if state.files is not None else 0
        rows = int((frame["n_files"].fillna(0) > 0).sum()) if "n_files" in frame.columns else 0
        text = f"files: {files} files listed for {rows} of {n} rows"
        if state.files is not None and "path" in state.files.columns:
            text += f", {_count(state.files, 'path')} downloaded"
        column = "files_error"
    elif step == "licences":
        text = f"licences: {_count(frame, 'licence_basis')} of {n} rows have terms"
        if "oa_status" in frame.columns:
            text += f", {_count(frame, 'oa_status')} an open-access status"
        column = "licence_error"
    else:
        rows = int((frame["n_related"].fillna(0) > 0).sum()) if "n_related" in frame.columns else 0
        text = f"related: {rows} of {n} rows have a counterpart"
        column = "related_error"
    if column in frame.columns:
        cells = frame[column].tolist()
        errors = sum(1 for c in cells if isinstance(c, str))
        abandoned = sum(1 for c in cells if is_abandoned(c))
        if errors:
            text += f"; {errors} with errors ({abandoned} abandoned: re-run to retry)"
    return text


def _progress_text(state: _State, original: pd.DataFrame) -> str:
    """How far an interrupted run got, and how to go on."""
    resume = "Re-run with the same --cache to resume without repeating finished requests."
    if state.done:
        return f"every step finished; some file downloads did not. {resume}"
    if state.frame is original:
        return f"no step finished. {resume}"
    errors = [c for c in state.frame.columns if str(c).endswith("_error")]
    unfinished = {
        i
        for column in errors
        for i, cell in enumerate(state.frame[column].tolist())
        if isinstance(cell, str) and "interrupted" in cell and is_abandoned(cell)
    }
    done = len(state.frame) - len(unfinished)
    return (
        f"{done} of {len(state.frame)} rows finished; the other rows say "
        f"'abandoned: interrupted'. {resume}"
    )


def _credentials(environ: Mapping[str, str]) -> dict[str, object]:
    # Every known key is named: a key absent from the environment is removed (None) even if
    # package options read earlier in this process still held one.
    return {key: (environ.get(var, "").strip() or None) for var, key in ENV_CREDENTIALS.items()}


def _id_columns(frame: pd.DataFrame, args: argparse.Namespace, input_path: Path) -> dict[str, Any]:
    """The columns named with ``--<kind>-col``, checked with the frame's (exit 5 if none)."""
    explicit = {
        kind: getattr(args, f"{kind}_col")
        for kind in CANONICAL
        if getattr(args, f"{kind}_col") is not None
    }
    try:
        detect_id_columns(frame.columns, explicit)
    except KeyError as exc:
        message = exc.args[0] if exc.args else str(exc)
        raise CliError(EXIT_COLUMNS, f"{input_path}: {_one_line(str(message))}") from None
    except ValueError as exc:
        hint = "name one with --doi-col / --pmid-col / --pmcid-col / --bookid-col"
        text = _one_line(str(exc)).split(" Or name one:")[0]
        raise CliError(EXIT_COLUMNS, f"{input_path}: {text} ({hint})") from None
    return explicit


def _command_text(
    args: argparse.Namespace, session_factory: SessionFactory, out: IO[str], err: IO[str]
) -> int:
    """``text``: the body work is :func:`litfetch_df.cli_text.text_outputs`; checks are here."""
    input_path, output = Path(args.input).expanduser(), Path(args.output).expanduser()
    if _format_of(output) != "parquet":
        raise CliError(EXIT_USAGE, f"text writes Parquet: OUTPUT must end in .parquet ({output})")
    frame = _read_input(input_path, args.encoding)
    fetch: dict[str, Any] = {"progress": False if args.no_progress or args.quiet else None}
    if needs_fetch(frame):
        fetch.update(_id_columns(frame, args, input_path))
        cache = args.cache or os.environ.get(CACHE_ENV, "").strip() or None
        if args.offline and cache is None:
            raise CliError(EXIT_USAGE, f"--offline replays a cache: give --cache DIR ({CACHE_ENV})")
        contact = (args.contact or os.environ.get(CONTACT_ENV, "")).strip() or None
        try:
            fetch["session"] = session_factory(
                contact=contact,
                cache=Path(cache).expanduser() if cache else None,
                cache_ttl=None,
                offline=args.offline,
                refresh=False,
            )
        except (ValueError, OSError) as exc:
            raise CliError(EXIT_CACHE, f"cannot use cache {cache}: {_one_line(str(exc))}") from None
        fetch["credentials"] = _credentials(os.environ)
        if args.bodies_dir:
            _check_writable_dir(Path(args.bodies_dir).expanduser(), "--bodies-dir")
            fetch["out_dir"] = Path(args.bodies_dir).expanduser()
    _check_output(output)
    for part in args.long:
        _check_output(long_path(output, part))
    with _library_warnings(err, skip_contact=False):
        wide, written = text_outputs(frame, output, parts=args.long, math=args.math, fetch=fetch)
    if not args.quiet:
        read = int(wide["text_format"].notna().sum())
        failed = int(wide["text_error"].notna().sum())
        print(f"{PROG}: wrote {', '.join(map(str, written))}", file=err)
        out.write(f"{len(wide)} rows: {read} read as text, {failed} with text_error\n")
    return EXIT_OK


def _default_session(
    *,
    contact: str | None,
    cache: str | os.PathLike[str] | None,
    cache_ttl: float | None,
    offline: bool,
    refresh: bool,
    allow_private_network: bool | None = None,
) -> Session:
    return Session(
        contact=contact,
        cache=cache,
        cache_ttl=cache_ttl,
        offline=offline,
        refresh=refresh,
        allow_private_network=allow_private_network,
    )


def _command_plan(args: argparse.Namespace, session_factory: SessionFactory, out: IO[str]) -> int:
    """``plan``: the per-host table of what ``run`` would ask; the session is never opened."""
    environ = os.environ
    input_path = Path(args.input).expanduser()
    frame = _read_input(input_path, args.encoding)
    explicit = _id_columns(frame, args, input_path)
    cache = args.cache or environ.get(CACHE_ENV, "").strip() or None
    contact = (args.contact or environ.get(CONTACT_ENV, "")).strip() or None
    try:
        # Only for its quota ledger (kept beside the cache): what today's runs have spent.
        session = session_factory(
            contact=contact,
            cache=Path(cache).expanduser() if cache else None,
            cache_ttl=None,
            offline=False,  # never opened: nothing is sent either way
            refresh=False,
        )
    except (ValueError, OSError) as exc:
        raise CliError(EXIT_CACHE, f"cannot use cache {cache}: {_one_line(str(exc))}") from None
    plan = plan_costs(
        frame,
        args.steps,
        credentials=_credentials(environ),
        contact=contact is not None,
        ledger=session.quota,
        id_columns=explicit,
    )
    out.write(format_plan(plan) + "\n")
    if args.output:
        target = Path(args.output).expanduser()
        try:
            plan.to_csv(target, index=False)
        except OSError as exc:
            raise CliError(EXIT_OUTPUT, f"cannot write {target}: {_os_reason(exc)}") from None
    return EXIT_OK


def _command_run(
    args: argparse.Namespace,
    session_factory: SessionFactory,
    out: IO[str],
    err: IO[str],
) -> int:
    environ = os.environ
    input_path = Path(args.input).expanduser()
    output = Path(args.output).expanduser()
    _format_of(output)
    with contextlib.suppress(OSError):
        if input_path.exists() and output.exists() and input_path.samefile(output):
            raise CliError(EXIT_USAGE, "OUTPUT would overwrite INPUT; choose another name")
    cache = args.cache or environ.get(CACHE_ENV, "").strip() or None
    offline = args.offline or environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE
    if offline and cache is None:
        raise CliError(EXIT_USAGE, f"--offline replays a cache: give --cache DIR (or {CACHE_ENV})")
    if offline and cache is not None and not _has_cache(Path(cache).expanduser()):
        raise CliError(
            EXIT_CACHE,
            f"no response cache at {cache}: --offline replays an existing cache "
            "(check the path, or run once without --offline to fill it)",
        )
    if args.files_dir and "files" not in args.steps:
        raise CliError(EXIT_USAGE, "--files-dir needs the files step (--steps ...,files)")
    if args.bodies_dir and "bodies" not in args.steps:
        raise CliError(EXIT_USAGE, "--bodies-dir needs the bodies step (--steps ...,bodies)")

    frame = _read_input(input_path, args.encoding)
    explicit = _id_columns(frame, args, input_path)

    _check_output(output)
    bodies_dir = Path(args.bodies_dir).expanduser() if args.bodies_dir else None
    files_dir = Path(args.files_dir).expanduser() if args.files_dir else None
    for directory, what in ((bodies_dir, "--bodies-dir"), (files_dir, "--files-dir")):
        if directory is not None:
            _check_writable_dir(directory, what)

    contact = (args.contact or environ.get(CONTACT_ENV, "")).strip() or None
    say: Callable[[str], None] = (
        (lambda _text: None)
        if args.quiet
        else (lambda text: print(f"{PROG}: {text}", file=err, flush=True))
    )
    if contact is None and "licences" in args.steps and not offline:
        say(
            f"no contact email (--contact or {CONTACT_ENV}): Unpaywall is skipped, so "
            "licences come only from body bytes"
        )
    try:
        session = session_factory(
            contact=contact,
            cache=Path(cache).expanduser() if cache else None,
            cache_ttl=args.cache_ttl * 86400.0 if args.cache_ttl else None,
            offline=offline,
            refresh=args.refresh,
            # Only passed when asked for, so a factory written before the flag still works.
            **({"allow_private_network": True} if args.allow_private_network else {}),
        )
    except (ValueError, OSError) as exc:
        raise CliError(EXIT_CACHE, f"cannot use cache {cache}: {_one_line(str(exc))}") from None

    common: dict[str, Any] = {
        "session": session,
        "credentials": _credentials(environ),
        "progress": False if args.no_progress or args.quiet else None,
    }
    if args.concurrency is not None:
        common["concurrency"] = args.concurrency
    run = _Run(session, common, explicit, bodies_dir, files_dir)
    state = _State(frame)
    say(f"read {len(frame)} rows from {input_path}")
    interrupted = False
    with _library_warnings(err, skip_contact=contact is None):
        try:
            run_sync(lambda: _run_all(run, state, args.steps, say), name="litfetch-df-run")
        except Interrupted as exc:
            interrupted = True
            if isinstance(exc.partial, pd.DataFrame):
                # Before the steps were done the partial is the articles table; after, it
                # is the list of files being downloaded.
                if state.done:
                    state.files = exc.partial
                else:
                    state.frame = exc.partial
        except KeyboardInterrupt:
            interrupted = True
        except Exception:
            # Keep what finished before the failure, then let main() report it.
            if state.done or state.frame is not frame:
                with contextlib.suppress(Exception):
                    write_result(state.frame, output, files=state.files)
            raise
    try:
        written = write_result(state.frame, output, files=state.files)
    except OSError as exc:
        raise CliError(EXIT_OUTPUT, f"cannot write output {output}: {_os_reason(exc)}") from None
    shown = ", ".join(str(p) for p in written)
    if interrupted:
        print(f"{PROG}: interrupted; wrote {shown}: {_progress_text(state, frame)}", file=err)
        return EXIT_INTERRUPTED
    say(f"wrote {shown}")
    if not args.quiet:
        out.write(summary_text(state.frame) + "\n")
    return EXIT_OK


@contextlib.contextmanager
def _library_warnings(err: IO[str], *, skip_contact: bool) -> Iterator[None]:
    # The library warns through ``warnings``; on the command line each becomes one line.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            shown: set[str] = set()
            for item in caught:
                text = _one_line(str(item.message))
                if skip_contact and "no contact email" in text:
                    continue  # already said in command-line terms
                if text not in shown:
                    shown.add(text)
                    print(f"{PROG}: warning: {text}", file=err)


# -- demo --------------------------------------------------------------------------------------


def _command_demo(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from .demo import run_demo

    output = Path(args.output).expanduser() if args.output else None
    if output is not None:
        _check_output(output)
    try:
        run_demo(output, progress=False if args.no_progress else None, stream=out)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CliError(EXIT_OUTPUT, f"cannot write output {output}: {_os_reason(exc)}") from None
    return EXIT_OK


# -- cache -------------------------------------------------------------------------------------


def _cache_file(directory: str) -> Path:
    path = Path(directory).expanduser()
    target = path / FILE_NAME if path.is_dir() else path
    if not target.is_file():
        raise CliError(EXIT_CACHE, f"no response cache at {path}")
    return target


def _size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


def _when(stamp: dt.datetime | None) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M UTC") if stamp is not None else "-"


def _open_existing(directory: str, ttl_days: float | None, *, read_only: bool) -> ResponseCache:
    target = _cache_file(directory)
    try:
        ttl = ttl_days * 86400.0 if ttl_days else None
        return ResponseCache(target, ttl=ttl, read_only=read_only)
    except (ValueError, OSError) as exc:
        raise CliError(EXIT_CACHE, f"cannot use cache {directory}: {_one_line(str(exc))}") from None


def _command_cache(args: argparse.Namespace, out: IO[str]) -> int:
    # Looking changes nothing: info opens the file read-only.
    cache = _open_existing(args.dir, args.ttl, read_only=args.cache_command == "info")
    try:
        if args.cache_command == "info":
            info = cache.info()
            days = info.ttl / 86400.0
            out.write(
                f"cache:    {info.path}\n"
                f"entries:  {info.entries} ({info.expired} expired under a {days:g}-day TTL)\n"
                f"size:     {_size(info.bytes)}\n"
                f"stored:   {_when(info.oldest)} to {_when(info.newest)}\n"
            )
            return EXIT_OK
        removed = cache.clear(expired_only=args.expired)
        what = "expired entries" if args.expired else "entries"
        out.write(f"removed {removed} {what} from {cache.path}\n")
        return EXIT_OK
    finally:
        cache.close()


# -- entry point -------------------------------------------------------------------------------


@contextlib.contextmanager
def _logging(verbosity: int, err: IO[str]) -> Iterator[None]:
    # The library logs problems per request; on the command line the error columns and
    # the step lines already tell them, so only -v shows the log.
    logger = logging.getLogger("litfetch_df")
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s %(name)s: %(message)s"))
    previous = (logger.level, logger.propagate)
    logger.setLevel(
        logging.ERROR if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    )
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous[0])
        logger.propagate = previous[1]


def main(
    argv: Sequence[str] | None = None,
    *,
    session_factory: SessionFactory | None = None,
) -> int:
    """Run ``litfetch-df`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    ``session_factory`` builds the :class:`Session` of ``run`` from its
    settings (contact, cache, cache_ttl, offline, refresh); tests pass one
    routed to a local fake. Failures the user can fix print one line on
    stderr and return the documented code (see the module docstring).
    """
    out, err = sys.stdout, sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    factory = session_factory if session_factory is not None else _default_session
    with _logging(args.verbose, err):
        try:
            if args.command == "run":
                return _command_run(args, factory, out, err)
            if args.command == "plan":
                return _command_plan(args, factory, out)
            if args.command == "demo":
                return _command_demo(args, out, err)
            if args.command == "text":
                return _command_text(args, factory, out, err)
            return _command_cache(args, out)
        except CliError as exc:
            print(f"{PROG}: error: {exc.message}", file=err)
            return exc.code
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=err)
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            # The reader went away (``| head``): stop quietly, and keep Python from
            # complaining about the unflushable stdout at exit.
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, out.fileno())
            return EXIT_PIPE
        except Exception as exc:
            if args.verbose:
                traceback.print_exc(file=err)
            hint = "" if args.verbose else " (run with -v for details)"
            print(f"{PROG}: error: {type(exc).__name__}: {_one_line(str(exc))}{hint}", file=err)
            return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
