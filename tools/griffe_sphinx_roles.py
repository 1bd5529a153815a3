"""Griffe extension for the docs build: Sphinx roles in docstrings read as inline code.

The docstrings cite names the Sphinx way (``:class:`ArticleIds```,
``:func:`~litfetch_df.ids.parse_doi```), which Markdown would show verbatim,
colons and all. This extension, loaded by mkdocstrings (``extensions:`` in
mkdocs.yml), turns each role into inline code: the name as written, or only
its last part when it starts with ``~`` (Sphinx's own rule).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(?P<tilde>~?)(?P<target>[^`]+)`")


def _plain(m: re.Match[str]) -> str:
    target = m["target"]
    if m["tilde"]:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` to ``target`` in inline code, before docstrings are parsed."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the docstring of each object as it is created."""
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_plain, obj.docstring.value)
