"""The oldest supported set (ci/constraints-oldest.txt) is exactly the declared lower bounds.

`make test-oldest` installs with those constraints, so a lower bound raised in
pyproject.toml but not there, or pinned above the bound, would leave the declared
minimum untested. README's "Supported versions" names the same pins.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# The optional extras a user installs for the frame's own features (Parquet and plots),
# and the test tools the oldest job runs the suite with.
EXTRAS = ("parquet", "plot", "test")


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = list(project["dependencies"])
    for extra in EXTRAS:
        names += project["optional-dependencies"][extra]
    return [Requirement(n) for n in names]


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    text = (ROOT / "ci" / "constraints-oldest.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"not an exact pin: {line}"
            pins[name.strip().lower().replace("_", "-")] = Version(version)
    return pins


def _lower_bound(req: Requirement) -> Version:
    bounds = [Version(s.version) for s in req.specifier if s.operator == ">="]
    assert len(bounds) == 1, f"{req}: declare exactly one lower bound"
    return bounds[0]


def test_every_declared_dependency_is_pinned_at_its_lower_bound() -> None:
    pins = _pins()
    for req in _declared():
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"ci/constraints-oldest.txt does not pin {req.name}"
        assert pins[name] == _lower_bound(req), f"{req.name}=={pins[name]} but {req}"


def test_the_oldest_python_is_the_declared_one() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "PYTHON_OLDEST ?= $(call find_python,python3.11,3.11)" in makefile


def test_readme_names_the_pinned_versions() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Supported versions", 1)[1].split("\n## ", 1)[0]
    for name, version in _pins().items():
        shown = {"numpy": "NumPy"}.get(name, name)
        assert f"{shown} {version}" in section, f"README does not name {shown} {version}"
