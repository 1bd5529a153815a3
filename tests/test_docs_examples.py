"""Every code example in README.md and docs/*.md runs, offline, so the docs cannot rot.

Rules for writers of docs (also in docs/index.md):

- A ```python block is executed. Blocks of one file run in order in one
  namespace (like a notebook), in a fresh temporary working directory.
  Top-level ``await`` is allowed, as in a Jupyter cell.
- A block whose first line is ``# doctest: live`` needs the network or the
  user's own files: it is only compiled, never run.
- In a ```bash / ```console / ```sh block, every line that starts with
  ``litfetch-df`` (optionally after ``$ ``) is run through
  :func:`litfetch_df.cli.app.main` in the same working directory and must exit 0,
  unless the block's first line is ``# doctest: live``. Other commands
  (``make …``, ``pip …``) are shown, not run.
- Nothing may reach the network: the real HTTP transport is replaced by one
  that records the attempt, and any attempt fails the test.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import litfetch_df
from litfetch_df.frame.engine.options import CACHE_ENV, CONTACT_ENV, ENV_CREDENTIALS, OFFLINE_ENV

ROOT = Path(__file__).resolve().parent.parent
LIVE_MARK = "# doctest: live"
PYTHON_LANGS = frozenset({"python", "py", "python3"})
SHELL_LANGS = frozenset({"bash", "console", "sh", "shell"})

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and its text."""

    path: Path
    line: int  # 1-based line of the first line of code
    lang: str
    code: str

    @property
    def live(self) -> bool:
        """Whether the block is marked as needing the network (``# doctest: live``)."""
        first = next((ln.strip() for ln in self.code.splitlines() if ln.strip()), "")
        return first.lower() == LIVE_MARK

    @property
    def where(self) -> str:
        """``file:line`` of the block, relative to the repository."""
        try:
            shown = self.path.relative_to(ROOT)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"


def _closes(line: str, fence: str) -> bool:
    text = line.strip()
    return len(text) >= len(fence) and set(text) == {fence[0]}


def extract_blocks(path: Path) -> list[Block]:
    """Return the fenced code blocks of a Markdown file, in order."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        lang = m.group("info").lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not _closes(lines[j], fence):
            line = lines[j]
            # Drop the fence's own indentation (CommonMark), never more.
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
            j += 1
        blocks.append(Block(path, i + 2, lang, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def doc_files() -> list[Path]:
    """The Markdown files whose examples are checked: README.md and docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def compile_block(block: Block) -> Any:
    """Compile a python block (top-level ``await`` allowed); raise SyntaxError with its place."""
    return compile(
        block.code,
        f"<{block.where}>",
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    """Execute a python block in ``namespace``; a top-level ``await`` runs on a fresh loop."""
    result = eval(compile_block(block), namespace)  # the examples are our own docs
    if inspect.iscoroutine(result):
        asyncio.run(result)


def shell_commands(block: Block) -> list[str]:
    """Return the ``litfetch-df …`` command lines of a shell block (prompt stripped)."""
    commands = []
    for raw in block.code.splitlines():
        line = raw.strip().removeprefix("$ ").strip()
        if line.startswith("litfetch-df ") or line == "litfetch-df":
            commands.append(line)
    return commands


def run_shell(block: Block) -> None:
    """Run each ``litfetch-df`` line of a shell block; fail on a non-zero exit code."""
    from litfetch_df.cli.app import main

    for command in shell_commands(block):
        argv = shlex.split(command, comments=True)[1:]
        code = main(argv)
        assert code == 0, f"{block.where}: `{command}` exited with {code}"


class NetworkAttempt(AssertionError):
    """A documentation example tried to reach the network."""


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A clean environment for examples: temp cwd, no user settings, no network.

    Yields the list of URLs that something tried to fetch over the real transport.
    """
    attempts: list[str] = []

    async def refuse(self: Any, request: httpx.Request) -> httpx.Response:
        attempts.append(str(request.url.copy_with(query=None)))
        raise NetworkAttempt(f"documentation example tried the network: {request.url.host}")

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse)
    saved = dict(os.environ)  # examples may set variables; none may leak into other tests
    for var in (*ENV_CREDENTIALS, CONTACT_ENV, CACHE_ENV, OFFLINE_ENV):
        os.environ.pop(var, None)
    monkeypatch.chdir(tmp_path)
    litfetch_df.reset_options()
    try:
        yield attempts
    finally:
        os.environ.clear()
        os.environ.update(saved)
        litfetch_df.reset_options()


def run_file(path: Path, attempts: list[str]) -> int:
    """Run every runnable block of ``path`` in order; return how many ran."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    ran = 0
    for block in extract_blocks(path):
        if block.lang in PYTHON_LANGS:
            if block.live:
                compile_block(block)
                continue
            try:
                run_python(block, namespace)
            except Exception as exc:
                raise AssertionError(
                    f"{block.where}: example raised {type(exc).__name__}: {exc}"
                ) from exc
            ran += 1
        elif block.lang in SHELL_LANGS and not block.live and shell_commands(block):
            run_shell(block)
            ran += 1
        assert not attempts, f"{block.where}: example reached for the network: {attempts}"
    return ran


# -- the docs themselves ----------------------------------------------------------------------


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run_offline(path: Path, sandbox: list[str]) -> None:
    run_file(path, sandbox)


def test_the_docs_have_runnable_examples() -> None:
    # Guards the extractor itself: if it silently found nothing, every test above would pass.
    runnable = {
        p.name: sum(
            1
            for b in extract_blocks(p)
            if not b.live
            and (b.lang in PYTHON_LANGS or (b.lang in SHELL_LANGS and bool(shell_commands(b))))
        )
        for p in doc_files()
    }
    for name in ("README.md", "quickstart.md", "accessor-reference.md", "caching-and-offline.md"):
        assert runnable.get(name, 0) >= 1, f"{name} has no runnable example: {runnable}"


# Pages whose conventions say top-level ``await`` examples are Jupyter cells.
JUPYTER_STYLE = frozenset({"api-reference.md"})


def test_examples_are_plain_python_unless_the_page_says_they_are_cells() -> None:
    for path in doc_files():
        if path.name in JUPYTER_STYLE:
            continue
        for block in extract_blocks(path):
            if block.lang in PYTHON_LANGS:
                # No top-level await: the example runs as written in a script.
                compile(block.code, f"<{block.where}>", "exec", dont_inherit=True)


def test_live_examples_still_compile() -> None:
    for path in doc_files():
        for block in extract_blocks(path):
            if block.lang in PYTHON_LANGS and block.live:
                compile_block(block)


def test_readme_opens_with_the_two_commands() -> None:
    blocks = extract_blocks(ROOT / "README.md")
    first = blocks[0]
    assert first.lang in SHELL_LANGS
    commands = [ln.split("#")[0].strip() for ln in first.code.splitlines() if ln.strip()]
    assert commands[:2] == ["make demo", "make test"]


def test_doc_links_point_at_files_that_exist() -> None:
    link = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")
    for path in [*doc_files(), ROOT / "docs" / "adr" / "README.md"]:
        for target in link.findall(path.read_text(encoding="utf-8")):
            assert (path.parent / target).exists(), f"{path.name}: broken link {target}"


# -- the runner (so that a broken example really fails) ---------------------------------------


def _md(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "example.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_runner_fails_on_a_raising_block_and_names_its_line(
    tmp_path: Path, sandbox: list[str]
) -> None:
    path = _md(
        tmp_path, "# t\n\n```python\nx = 1\n```\n\ntext\n\n```python\nraise KeyError(x)\n```\n"
    )
    with pytest.raises(AssertionError, match=r"example\.md:10: example raised KeyError"):
        run_file(path, sandbox)


def test_runner_shares_a_namespace_and_supports_top_level_await(
    tmp_path: Path, sandbox: list[str]
) -> None:
    path = _md(
        tmp_path,
        "```python\nimport asyncio\nvalue = 2\n```\n\n"
        "```python\nawait asyncio.sleep(0)\nassert value == 2\nresult = value * 3\n```\n"
        "```python\nassert result == 6\n```\n",
    )
    assert run_file(path, sandbox) == 3


def test_runner_skips_live_blocks_but_compiles_them(tmp_path: Path, sandbox: list[str]) -> None:
    path = _md(tmp_path, "```python\n# doctest: live\nraise SystemExit('never run')\n```\n")
    assert run_file(path, sandbox) == 0
    broken = _md(tmp_path, "```python\n# doctest: live\ndef (:\n```\n")
    with pytest.raises(SyntaxError):
        run_file(broken, sandbox)


def test_runner_refuses_the_network(tmp_path: Path, sandbox: list[str]) -> None:
    # Through the DataFrame face the transport failure becomes a row error, not an
    # exception, so the runner must notice the attempt itself.
    path = _md(
        tmp_path,
        "```python\nimport pandas as pd\nimport litfetch_df\n"
        "pd.DataFrame({'pmid': ['30000001']}).lit.resolve(progress=False)\n```\n",
    )
    with pytest.raises(AssertionError, match="network"):
        run_file(path, sandbox)


def test_runner_runs_cli_lines_and_checks_exit_codes(tmp_path: Path, sandbox: list[str]) -> None:
    ok = _md(tmp_path, "```bash\nmake demo   # not run\n$ litfetch-df --version\n```\n")
    assert run_file(ok, sandbox) == 1
    bad = _md(tmp_path, "```bash\nlitfetch-df run missing.csv -o out.csv\n```\n")
    with pytest.raises(AssertionError, match="exited with 3"):
        run_file(bad, sandbox)


# -- tables that restate the code ---------------------------------------------------------------


def test_the_rate_table_matches_the_code() -> None:
    from litfetch_df import Rate

    text = (ROOT / "docs" / "politeness-and-rate-limits.md").read_text(encoding="utf-8")
    row = re.compile(
        r"^\| `(?P<name>[A-Z0-9_]+)` \| (?P<interval>[0-9.]+) s \| [^|]+ \| (?P<cap>[^|]+) \|"
    )
    documented = {}
    for line in text.splitlines():
        m = row.match(line)
        if m is not None:
            cap = m.group("cap").strip()
            documented[m.group("name")] = (
                float(m.group("interval")),
                0 if cap == "unbounded" else int(cap),
            )
    actual = {rate.name: (rate.min_interval, rate.max_in_flight) for rate in Rate}
    assert documented == actual


def test_the_environment_table_matches_the_code() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `([A-Z_]+)` \|", text, flags=re.MULTILINE))
    assert named == {*ENV_CREDENTIALS, CONTACT_ENV, CACHE_ENV, OFFLINE_ENV}
    for var, key in ENV_CREDENTIALS.items():
        assert f'| `{var}` | `credentials["{key}"]` |' in text


# -- the notebooks (executed by `pytest --nbmake notebooks/`; checked for hygiene here) -------

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_five_notebooks() -> None:
    assert [p.name[:3] for p in NOTEBOOKS] == ["01-", "02-", "03-", "04-", "05-"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean_and_offline_by_default(path: Path) -> None:
    import json

    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        assert cell.get("outputs") == [] and cell.get("execution_count") is None, (
            f"{path.name}: saved with outputs; clear them before committing"
        )
    # One clearly marked switch, near the top, off by default.
    switches = [i for i, src in enumerate(code) if re.search(r"^LIVE = ", src, re.MULTILINE)]
    assert switches == [0], f"{path.name}: the LIVE switch must be the first code cell"
    assert re.search(r"^LIVE = False\b", code[0], re.MULTILINE)
    assert sum(c["cell_type"] == "markdown" for c in nb["cells"]) >= 5, "prose, not just code"
    for src in code:
        compile(src, path.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def test_the_adr_index_lists_every_record() -> None:
    adr = ROOT / "docs" / "adr"
    index = (adr / "README.md").read_text(encoding="utf-8")
    for record in sorted(adr.glob("[0-9][0-9][0-9][0-9]-*.md")):
        assert f"]({record.name})" in index, f"docs/adr/README.md does not list {record.name}"


def test_the_licence_file_matches_the_declared_licence() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "the litfetch_df authors" in text
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_contributing_cites_files_that_exist() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    cited = re.findall(r"\b((?:docs|tests|tools|benchmarks|notebooks)/[\w./-]+\w)", text)
    assert cited
    # Placeholders (tests/test_x.py) name no file.
    missing = [c for c in cited if not (ROOT / c).exists() and "_x." not in c]
    assert not missing, f"CONTRIBUTING.md cites missing files: {missing}"


def test_binder_is_pinned_exactly_and_within_the_declared_bounds() -> None:
    from packaging.requirements import Requirement

    pins: dict[str, str] = {}
    for line in (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version and "<" not in line and ">" not in line, f"not an exact pin: {line}"
            pins[name.lower().replace("_", "-")] = version
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    declared = [Requirement(d) for d in re.findall(r'"([^"]+)"', block)]
    declared += [Requirement("matplotlib>=3.8"), Requirement("pyarrow>=14")]  # plot, parquet
    extras = text.split("[project.optional-dependencies]", 1)[1]
    dask_extra = extras.split("dask = [", 1)[1].split("]", 1)[0]  # notebook 04 needs it
    declared += [Requirement(d) for d in re.findall(r'"([^"]+)"', dask_extra)]
    for req in declared:
        assert req.name in pins, f"binder/requirements.txt does not pin {req.name}"
        assert req.specifier.contains(pins[req.name]), f"{req.name}=={pins[req.name]}"
    runtime = (ROOT / "binder" / "runtime.txt").read_text(encoding="utf-8").strip()
    assert runtime.startswith("python-3.")
