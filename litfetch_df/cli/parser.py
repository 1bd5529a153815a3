"""The ``litfetch-df`` argument parser: every subcommand, its options and its help."""

from __future__ import annotations

import argparse
import codecs
import copy
import math

from .._version import __version__
from ..frame.engine.options import CACHE_ENV, CONTACT_ENV, OFFLINE_ENV
from ..wire.netguard import ALLOW_PRIVATE_NETWORK_ENV
from .codes import PROG, STEPS
from .text import add_text_parser

__all__ = ["build_parser"]

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
