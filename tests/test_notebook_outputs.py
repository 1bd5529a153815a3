"""The notebooks, executed, show readable frames: no value reprs, one line per cell.

``pytest --nbmake`` checks that the notebooks run; this test also reads what
they show. No output may hold a dataclass repr (``Blob(``, ``File(``,
``ArticleIds(`` …): a reader sees the short texts of the values instead. Every
cell of every displayed frame fits on one line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
REPRS = ("Blob(", "File(", "ArticleIds(", "Related(", "RelationType.", "FileKind.")
_TD = re.compile(r"<td>(.*?)</td>", re.DOTALL)


def _texts(output: dict[str, object]) -> list[str]:
    texts: list[str] = []
    text = output.get("text")
    if isinstance(text, str):
        texts.append(text)
    data = output.get("data")
    if isinstance(data, dict):
        for kind, value in data.items():
            if kind.startswith("text/"):
                texts.append(value if isinstance(value, str) else "".join(value))
    return texts


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_outputs_are_readable(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    frames = 0
    for number, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            for text in _texts(output):
                shown = [r for r in REPRS if r in text]
                assert not shown, f"{path.name} cell {number} shows {shown}: {text[:200]!r}"
                cells = _TD.findall(text)
                frames += bool(cells)
                tall = [c for c in cells if "\n" in c.strip() or "<br" in c]
                assert not tall, f"{path.name} cell {number}: a frame cell spans lines: {tall[0]!r}"
    assert frames, f"{path.name} displays no frame"
