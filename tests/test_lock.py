"""``requirements.lock`` pins what ``make install`` and CI install; it must still satisfy ``pyproject.toml``.

The lock is renewed with ``make lock`` (uv's resolver over pyproject's ranges, with hashes). A dependency
added to or narrowed in ``pyproject.toml`` without renewing the lock fails here, before an install that
would then miss it or break ``pip install --require-hashes``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
MAKEFILE = ROOT / "Makefile"


def _locked() -> dict[str, list[tuple[Version, str, int]]]:
    """name -> [(version, marker text, number of hashes)] of every pin in the lock."""
    text = LOCK.read_text()
    out: dict[str, list[tuple[Version, str, int]]] = {}
    # one entry: "name==version [; marker] \" then "--hash=..." continuation lines, then "# via" comments
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = entry.split("\\", 1)[0].strip()
        if not head or head.startswith("#"):
            continue
        spec, _, marker = head.partition(";")
        name, _, version = spec.strip().partition("==")
        assert version, f"requirements.lock: {head!r} is not pinned with =="
        out.setdefault(canonicalize_name(name), []).append(
            (Version(version.strip()), marker.strip(), entry.count("--hash=sha256:")))
    return out


def _locked_extras() -> list[str]:
    line = next(line for line in MAKEFILE.read_text().splitlines() if line.startswith("LOCK_EXTRAS"))
    return re.findall(r"--extra\s+(\S+)", line)


def _required() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = _locked_extras()
    assert extras, "Makefile's LOCK_EXTRAS names no extra"
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def test_every_pin_has_hashes():
    locked = _locked()
    assert len(locked) > 20, "requirements.lock looks empty"
    unhashed = [name for name, pins in locked.items() for _, _, hashes in pins if hashes == 0]
    assert not unhashed, f"pins without --hash (pip install --require-hashes refuses them): {unhashed}"


def test_the_lock_satisfies_every_requirement_of_pyproject():
    locked = _locked()
    missing, outside = [], []
    for req in _required():
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11", "extra": ""}):
            continue
        pins = locked.get(canonicalize_name(req.name))
        if not pins:
            missing.append(str(req))
            continue
        outside += [f"{req} (locked {v})" for v, _, _ in pins if not req.specifier.contains(v, prereleases=True)]
    assert not missing, f"in pyproject.toml, not in requirements.lock (run `make lock`): {missing}"
    assert not outside, f"locked outside pyproject.toml's range (run `make lock`): {outside}"
