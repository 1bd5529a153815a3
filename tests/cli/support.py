"""What the command-line tests share: a three-article world, secrets, an export, helpers."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from litfetch_df import Session
from litfetch_df.cli import app as cli
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import CC_BY, CC_BY_NC, Article, BodyHome, LicenceStyle

PMC = Article(
    pmid="30000001",
    pmcid="PMC7000001",
    pmc_versions=1,
    doi="10.1000/abc.1",
    body=BodyHome.PMC_OA,
    licence=CC_BY,
    licence_style=LicenceStyle.XLINK,
    oa_status="gold",
    pdf_url="https://publisher.example.org/article/abc.1.pdf",
    n_supplementary=2,
)
EPMC = Article(
    pmid="30000002",
    pmcid="PMC7000002",
    doi="10.1000/abc.2",
    body=BodyHome.EUROPE_PMC,
    licence=CC_BY_NC,
    oa_status="green",
)
DOI_ONLY = Article(
    doi="10.5555/xyz-9", oa_status="closed", preprint_doi="10.1101/2026.01.05.600001"
)
ARTICLES = (PMC, EPMC, DOI_ONLY)

# Distinct, recognisable values: none may ever show up in an output.
SECRETS = {
    "NCBI_API_KEY": "ncbi-secret-0123456789",
    "ELSEVIER_API_KEY": "elsevier-secret-0123456789",
    "SPRINGER_API_KEY": "springer-secret-0123456789",
    "SPRINGER_META_API_KEY": "springermeta-secret-0123456789",
    "SEMANTIC_SCHOLAR_API_KEY": "s2-secret-0123456789",
    "OPENALEX_API_KEY": "openalex-secret-0123456789",
}

EXPORT = (
    '"PMID","Title","PMCID","DOI"\n'
    '"30000001","One","PMC7000001","10.1000/abc.1"\n'
    '"30000002","Two",,\n'
    ',"Three",,"https://doi.org/10.5555/xyz-9"\n'
)


def routed(fake: FakeUpstream) -> cli.SessionFactory:
    def factory(**settings: Any) -> Session:
        return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, **settings)

    return factory


def run(argv: list[str], fake: FakeUpstream | None = None) -> int:
    return cli.main(argv, session_factory=routed(fake) if fake is not None else None)


def one_line_error(err: str, code_text: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("litfetch-df: error:"), err
    assert code_text in lines[-1]
    assert "Traceback" not in err


def ctrl_c_on_call(
    original: Callable[..., Awaitable[Any]], at: int, *, settle: bool = False
) -> tuple[Callable[..., Awaitable[Any]], list[tuple[Any, ...]]]:
    """Wrap ``original`` so that its ``at``-th call presses Ctrl-C and never returns.

    Returns the wrapper and the list of the calls' arguments. With ``settle``,
    the interrupt waits until an earlier call has returned, so that at least one
    row has finished: an event, not a pause on the wall clock, so a loaded
    machine cannot change what the test sees.
    """
    calls: list[tuple[Any, ...]] = []
    earlier_done: asyncio.Event | None = None

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal earlier_done
        calls.append(args)
        if earlier_done is None:
            earlier_done = asyncio.Event()  # made in the running loop
        if len(calls) == at:
            if settle and at > 1:
                # Generous: only reached if no earlier call can end.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(earlier_done.wait(), 30)
            _thread.interrupt_main()
            await asyncio.sleep(60)
        try:
            return await original(*args, **kwargs)
        finally:
            earlier_done.set()

    return wrapper, calls
