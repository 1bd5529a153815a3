"""``litfetch-df text``: a table of articles (or a saved run) to a text corpus in Parquet.

The command's parser and its work; :mod:`litfetch_df.cli.app` checks the paths and
ids, builds the session and reports errors with its exit codes. The input is
any table ``run`` reads: one holding bodies (a Parquet file ``run`` wrote with
the bodies step) is read as it is, one without has its bodies fetched first.
``OUTPUT`` gets the wide frame (``df.lit.text()``); each ``--long`` part goes
beside it as ``<OUTPUT stem>.<part>.parquet`` (``df.lit.text_long(part)``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pandas as pd

from ..frame.fulltext import has_bodies
from ..frame.io.parquet import to_parquet
from ..frame.text_long import TEXT_PARTS
from ..text import MATH_MODES

__all__ = [
    "DESCRIPTION",
    "add_text_parser",
    "long_path",
    "needs_fetch",
    "parse_parts",
    "text_outputs",
]

DESCRIPTION: Final = """\
Read every row's full-text body as text (JATS, BITS, Elsevier XML) and write
the wide text columns (title, abstract, body text, statements, counts,
text_loss, text_error) to OUTPUT, a Parquet file. A table without bodies has
them fetched first, as `run --steps resolve,bodies` would. With --long, one
row per section, paragraph, reference, citation or caption goes to
<OUTPUT stem>.<part>.parquet, keyed by the row's index and ids.
"""


def parse_parts(text: str) -> tuple[str, ...]:
    """Parse ``--long``: comma-separated parts of :data:`TEXT_PARTS` (``all``: every one)."""
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if parts == ("all",):
        return TEXT_PARTS
    unknown = [p for p in parts if p not in TEXT_PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(
            f"unknown part {', '.join(unknown) or text!r}; choose from {', '.join(TEXT_PARTS)}"
        )
    return parts


def add_text_parser(commands: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add the ``text`` subcommand to ``commands`` (an ``add_subparsers`` result)."""
    text = commands.add_parser(
        "text",
        parents=list(parents),
        help="read every row's body as text and write a text corpus (Parquet)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    text.add_argument("input", metavar="INPUT", help="the table to read (as for run)")
    text.add_argument(
        "-o", "--output", required=True, metavar="OUTPUT", help="the Parquet file to write"
    )
    text.add_argument(
        "--long",
        type=parse_parts,
        default=(),
        metavar="PARTS",
        help=f"also write long frames: {','.join(TEXT_PARTS)} or all",
    )
    text.add_argument(
        "--math",
        choices=MATH_MODES,
        default="tex",
        help="formulas as TeX (else MathML text), or always a placeholder",
    )
    text.add_argument("--bodies-dir", metavar="DIR", help="save fetched bodies in DIR")
    text.add_argument("--contact", metavar="EMAIL", help="your email for the polite pools")
    text.add_argument("--cache", metavar="DIR", help="keep upstream answers in DIR")
    text.add_argument("--offline", action="store_true", help="answer only from --cache")
    text.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    text.add_argument("-q", "--quiet", action="store_true", help="nothing on stdout or stderr")
    for kind in ("pmid", "pmcid", "doi", "bookid"):
        text.add_argument(f"--{kind}-col", metavar="NAME", help=f"the column holding {kind}s")
    text.add_argument("--encoding", default="utf-8", metavar="ENC", help="encoding of INPUT")


def long_path(output: Path, part: str) -> Path:
    """Where the ``part`` long frame goes: ``<OUTPUT stem>.<part>.parquet`` beside OUTPUT."""
    return output.with_name(f"{output.stem}.{part}.parquet")


def text_outputs(
    frame: pd.DataFrame,
    output: Path,
    *,
    parts: Sequence[str],
    math: str,
    fetch: Mapping[str, Any],
) -> tuple[pd.DataFrame, list[Path]]:
    """Read ``frame``'s bodies (fetched first if it has none), write OUTPUT and the parts.

    Returns the wide frame and the paths written, OUTPUT first. ``fetch`` are
    ``df.lit.fetch_bodies()``'s keywords (``session``, ``out_dir``, ``progress`` …).
    """
    if needs_fetch(frame):
        frame = frame.lit.fetch_bodies(**fetch)
    # No out_dir here: the corpus file holds the body text itself.
    wide = frame.lit.text(math=math)
    # The bodies stay out of the corpus file: its point is the text (the bodies step's
    # own output keeps them), and a body can be megabytes.
    to_parquet(wide.drop(columns=["body"], errors="ignore"), output)
    written = [output]
    for part in parts:
        where = long_path(output, part)
        to_parquet(wide.lit.text_long(part, math=math), where)
        written.append(where)
    return wide, written


def needs_fetch(frame: pd.DataFrame) -> bool:
    """Whether ``frame`` has no bodies, so ``text`` fetches them (and needs id columns)."""
    return not has_bodies(frame)
