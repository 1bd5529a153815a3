"""MkDocs hooks (``hooks:`` in mkdocs.yml): the notebooks join the site from where they live.

The notebooks stay in ``notebooks/`` (Binder, nbmake and the notebook tests find
them there); the site shows them at ``notebooks/<name>.html``, executed by
mkdocs-jupyter. The pages in ``docs/`` link to them as the repository lays them
out (``../notebooks/<name>.ipynb``), so the same link works on the forge and in
the site: this hook rewrites such links to the site's copy before MkDocs checks
them. Any other link that leaves ``docs/`` is left as it is, and strict mode
reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = "notebooks"

# ](target) or ](target "title"); the target has no spaces (as in every page here)
_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?P<rest>[^)]*)\)")


def _notebooks() -> list[Path]:
    return sorted((ROOT / NOTEBOOKS).glob("*.ipynb"))


@event_priority(100)  # before mkdocs-jupyter wraps the .ipynb files it renders
def on_files(files: Files, config: Any) -> Files:
    """Add every notebook of ``notebooks/`` to the site, at ``notebooks/<name>``."""
    for nb in _notebooks():
        files.append(
            File(
                f"{NOTEBOOKS}/{nb.name}",
                str(ROOT),
                config["site_dir"],
                config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point repository-relative links to a notebook at the notebook's page in the site."""
    docs_dir = Path(config["docs_dir"]).resolve()
    src = Path(page.file.abs_src_path).resolve()
    if not src.is_relative_to(docs_dir):
        return markdown  # a notebook itself: its links are its own
    page_dir = posixpath.dirname(page.file.src_uri)
    names = {nb.name for nb in _notebooks()}

    def rewrite(m: re.Match[str]) -> str:
        target = m["target"]
        if "://" in target or target.startswith(("/", "mailto:")):
            return m[0]
        in_repo = (src.parent / target).resolve()
        if in_repo.parent != ROOT / NOTEBOOKS or in_repo.name not in names:
            return m[0]
        site_target = posixpath.relpath(f"{NOTEBOOKS}/{in_repo.name}", page_dir or ".")
        return f"]({site_target}{m['rest']})"

    return _LINK.sub(rewrite, markdown)
