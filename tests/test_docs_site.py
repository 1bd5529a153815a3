"""The documentation site's sources hold together, without building it.

`make docs` builds the site in strict mode (a broken link, a broken anchor, a
page left out of the nav or a failing notebook fails it). These checks catch
the commonest breakages in the test run already, without MkDocs installed:

- every relative link in ``docs/`` lands on a file the site holds: a page of
  ``docs/``, or a notebook of ``notebooks/`` (which the build adds to the site,
  ``tools/mkdocs_hooks.py``); a link to anything else outside ``docs/``
  (``../README.md``, a source file) exists on the forge but not in the site;
- every page and every notebook is in the nav of ``mkdocs.yml``;
- every name of ``litfetch_df.__all__`` is rendered by ``docs/api-generated.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import litfetch_df

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and [text](target "title"); the target may follow a line break
_LINK = re.compile(r"\]\(\s*(?P<target>[^)\s]+)[^)]*\)")


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _links(markdown: str) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", markdown))
    return [m["target"] for m in _LINK.finditer(text)]


def _broken(page: Path, markdown: str | None = None) -> list[str]:
    """The relative links of ``page`` (or of ``markdown`` placed there) the site cannot follow."""
    if markdown is None:
        markdown = page.read_text(encoding="utf-8")
    broken = []
    for target in _links(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor on the same page
        path = (page.parent / target.split("#", 1)[0]).resolve()
        in_site = path.is_relative_to(DOCS) or (
            path.parent == NOTEBOOKS and path.suffix == ".ipynb"
        )
        if not (in_site and path.is_file()):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_relative_links_land_in_the_site(page: Path) -> None:
    assert _broken(page) == []


def test_a_broken_link_is_caught() -> None:
    markdown = (
        "[a](quickstart.md) [b](../README.md) [c](../notebooks/nope.ipynb) [d](gone.md#x)\n"
        "[e](../notebooks/01-explore-a-pubmed-export.ipynb) [f](adr/README.md#x) `[g](no.md)`\n"
    )
    assert _broken(DOCS / "probe.md", markdown) == [
        "../README.md",
        "../notebooks/nope.ipynb",
        "gone.md#x",
    ]


def test_every_page_and_notebook_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    listed = set(re.findall(r"(?:^\s*-|:)\s*([\w./-]+\.(?:md|ipynb))\s*$", nav, re.MULTILINE))
    pages = {str(p.relative_to(DOCS)) for p in _pages()}
    notebooks = {f"notebooks/{p.name}" for p in NOTEBOOKS.glob("*.ipynb")}
    assert pages | notebooks == listed


def test_the_generated_reference_renders_every_public_name() -> None:
    text = (DOCS / "api-generated.md").read_text(encoding="utf-8")
    rendered = set(re.findall(r"^::: litfetch_df\.(\w+)\s*$", text, re.MULTILINE))
    assert set(litfetch_df.__all__) - rendered == set()
