"""``litfetch-df``: the command line for batch jobs outside notebooks.

Subcommands:

* ``run INPUT -o OUTPUT``: read a table of articles (CSV, TSV, Parquet or a
  PubMed export), run the chosen steps (resolve, bodies, files, licences,
  related) and write the result as CSV, TSV or Parquet;
* ``text INPUT -o OUTPUT.parquet``: every row's body read as text, a text
  corpus in Parquet (:mod:`litfetch_df.cli.text`);
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

The parser is in :mod:`~litfetch_df.cli.parser`, the checks made before any work in
:mod:`~litfetch_df.cli.checks`, the exit codes in :mod:`~litfetch_df.cli.codes` and the
``cache`` subcommand in :mod:`~litfetch_df.cli.cache_command`.

(About 560 lines, over the project's 550: most of it is this page and the ``run``
command's progress and summary.)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, Protocol

import pandas as pd

from .. import frame as _frame  # noqa: F401  (importing it registers the .lit accessor)
from ..frame.accessor import LitFrameAccessor
from ..frame.engine.bridge import Interrupted, run_sync
from ..frame.engine.cost import format_plan, plan_costs
from ..frame.engine.options import CACHE_ENV, CONTACT_ENV, ENV_CREDENTIALS, OFFLINE_ENV
from ..frame.engine.pipeline import files_long, is_abandoned
from ..session import Session
from .cache_command import command_cache
from .checks import (
    check_output,
    check_writable_dir,
    format_of,
    has_cache,
    id_columns,
    os_reason,
    read_input,
)
from .codes import (
    EXIT_CACHE,
    EXIT_COLUMNS,
    EXIT_DECODE,
    EXIT_ERROR,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_PIPE,
    EXIT_USAGE,
    PROG,
    STEPS,
    CliError,
    one_line,
)
from .parser import build_parser
from .results import OUTPUT_FORMATS, flatten_result, summary_text, write_result
from .text import long_path, needs_fetch, text_outputs

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


def _command_text(
    args: argparse.Namespace, session_factory: SessionFactory, out: IO[str], err: IO[str]
) -> int:
    """``text``: the body work is :func:`litfetch_df.cli.text.text_outputs`; checks are here."""
    input_path, output = Path(args.input).expanduser(), Path(args.output).expanduser()
    if format_of(output) != "parquet":
        raise CliError(EXIT_USAGE, f"text writes Parquet: OUTPUT must end in .parquet ({output})")
    frame = read_input(input_path, args.encoding)
    fetch: dict[str, Any] = {"progress": False if args.no_progress or args.quiet else None}
    if needs_fetch(frame):
        fetch.update(id_columns(frame, args, input_path))
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
            raise CliError(EXIT_CACHE, f"cannot use cache {cache}: {one_line(str(exc))}") from None
        fetch["credentials"] = _credentials(os.environ)
        if args.bodies_dir:
            check_writable_dir(Path(args.bodies_dir).expanduser(), "--bodies-dir")
            fetch["out_dir"] = Path(args.bodies_dir).expanduser()
    check_output(output)
    for part in args.long:
        check_output(long_path(output, part))
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
    frame = read_input(input_path, args.encoding)
    explicit = id_columns(frame, args, input_path)
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
        raise CliError(EXIT_CACHE, f"cannot use cache {cache}: {one_line(str(exc))}") from None
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
            raise CliError(EXIT_OUTPUT, f"cannot write {target}: {os_reason(exc)}") from None
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
    format_of(output)
    with contextlib.suppress(OSError):
        if input_path.exists() and output.exists() and input_path.samefile(output):
            raise CliError(EXIT_USAGE, "OUTPUT would overwrite INPUT; choose another name")
    cache = args.cache or environ.get(CACHE_ENV, "").strip() or None
    offline = args.offline or environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE
    if offline and cache is None:
        raise CliError(EXIT_USAGE, f"--offline replays a cache: give --cache DIR (or {CACHE_ENV})")
    if offline and cache is not None and not has_cache(Path(cache).expanduser()):
        raise CliError(
            EXIT_CACHE,
            f"no response cache at {cache}: --offline replays an existing cache "
            "(check the path, or run once without --offline to fill it)",
        )
    if args.files_dir and "files" not in args.steps:
        raise CliError(EXIT_USAGE, "--files-dir needs the files step (--steps ...,files)")
    if args.bodies_dir and "bodies" not in args.steps:
        raise CliError(EXIT_USAGE, "--bodies-dir needs the bodies step (--steps ...,bodies)")

    frame = read_input(input_path, args.encoding)
    explicit = id_columns(frame, args, input_path)

    check_output(output)
    bodies_dir = Path(args.bodies_dir).expanduser() if args.bodies_dir else None
    files_dir = Path(args.files_dir).expanduser() if args.files_dir else None
    for directory, what in ((bodies_dir, "--bodies-dir"), (files_dir, "--files-dir")):
        if directory is not None:
            check_writable_dir(directory, what)

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
        raise CliError(EXIT_CACHE, f"cannot use cache {cache}: {one_line(str(exc))}") from None

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
        raise CliError(EXIT_OUTPUT, f"cannot write output {output}: {os_reason(exc)}") from None
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
                text = one_line(str(item.message))
                if skip_contact and "no contact email" in text:
                    continue  # already said in command-line terms
                if text not in shown:
                    shown.add(text)
                    print(f"{PROG}: warning: {text}", file=err)


# -- demo --------------------------------------------------------------------------------------


def _command_demo(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ..demo import run_demo

    output = Path(args.output).expanduser() if args.output else None
    if output is not None:
        check_output(output)
    try:
        run_demo(output, progress=False if args.no_progress else None, stream=out)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CliError(EXIT_OUTPUT, f"cannot write output {output}: {os_reason(exc)}") from None
    return EXIT_OK


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
            return command_cache(args, out)
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
            print(f"{PROG}: error: {type(exc).__name__}: {one_line(str(exc))}{hint}", file=err)
            return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
