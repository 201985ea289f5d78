"""The image installs exactly the files its lock names: each dependency pinned to one version,
with the hashes of that version's files (pip's hash-checking mode, which the image's build runs
in; `make test` builds the image from this lock)."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "deploy/image/requirements.lock"


def _requirements():
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_every_dependency_is_pinned_to_one_version_with_the_hashes_of_its_files():
    lines = _requirements()
    assert len(lines) > 50  # the whole tree, not the direct dependencies alone
    for line in lines:
        pin, *hashes = re.split(r"\s+--hash=", line)
        [specifier] = Requirement(pin).specifier
        assert specifier.operator == "==", line
        assert hashes, pin
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h.strip()) for h in hashes), pin


def _pins():
    """{canonical name: version} of the lock."""
    pins = {}
    for line in _requirements():
        requirement = Requirement(re.split(r"\s+--hash=", line)[0])
        [specifier] = requirement.specifier
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def _project():
    with (ROOT / "pyproject.toml").open("rb") as handle:
        project = tomllib.load(handle)["project"]
    return project["dependencies"], project["optional-dependencies"]["dev"]


def _needed(requirements):
    """The canonical names of `requirements` (strings) and of all they need, as the
    distributions installed here say (extras followed): the image's whole tree, by name."""
    needed, todo = set(), [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in needed:
            continue
        needed.add(key)
        for line in metadata.requires(name) or ():
            child = Requirement(line)
            extras = requirement.extras or {""}
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in extras):
                todo.append(child)
    return {name for name, _ in needed}


def test_the_lock_pins_what_pyproject_pins_and_everything_that_needs():
    """A version bumped in pyproject.toml but not in the lock would ship the old one in the
    image while the tests ran the new one; a dependency added without its own would fail the
    image's build only."""
    pins = _pins()
    runtime, _ = _project()
    for line in runtime:
        requirement = Requirement(line)
        [specifier] = requirement.specifier
        assert pins.get(canonicalize_name(requirement.name)) == specifier.version, line
    missing = _needed(runtime) - pins.keys()
    assert not missing, f"needed by the portal's dependencies but not in the lock: {missing}"


def test_the_image_ships_no_tool_only_the_tests_and_linters_need():
    runtime, dev = _project()
    tools = _needed(dev) - _needed(runtime)
    assert {"pytest", "ruff", "mypy", "playwright"} <= tools  # what the check is about
    shipped = tools & _pins().keys()
    assert not shipped, f"test and lint tools in the image's lock: {shipped}"
