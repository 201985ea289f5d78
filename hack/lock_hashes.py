"""Write the hashes of the wheels the package index serves for each pin of the image's lock
(deploy/image/requirements.lock), so the image's `pip install` takes those files and no other
(pip's hash-checking mode, with wheels only: a source build would fetch build dependencies no
hash covers): a release replaced on the index, or a mirror serving other bytes, fails the build
instead of entering the image.

    .venv/bin/python hack/lock_hashes.py    (after changing a pin)

Every Linux wheel of the pinned version is hashed (any Python, any Linux architecture: the
image's base decides which one pip picks); Windows and macOS wheels are left out, and a pin
with no Linux wheel at all is refused. The index is PIP_INDEX_URL's, or PyPI's.
"""

import os
import re
import sys
from pathlib import Path

import requests
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

LOCK = Path(__file__).resolve().parent.parent / "deploy/image/requirements.lock"
INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
ELSEWHERE = ("win", "macosx", "ios", "android")  # platforms no image runs on


def read(lock: Path) -> list[str | Requirement]:
    """The lock's lines: comments and blank lines as they are, each pin as its requirement
    (hashes dropped, marker kept)."""
    entries: list[str | Requirement] = []
    joined = re.sub(r"\\\n\s*", " ", lock.read_text())
    for line in joined.splitlines():
        if line.startswith("#") or not line.strip():
            entries.append(line)
            continue
        pin = re.sub(r"\s*--hash=\S+", "", line).strip()
        try:
            requirement = Requirement(pin)
        except InvalidRequirement as exc:
            sys.exit(f"{lock.name}: not a pin: {line!r} ({exc})")
        if [s.operator for s in requirement.specifier] != ["=="]:
            sys.exit(f"{lock.name}: {pin!r} is not pinned to one version (name==version)")
        entries.append(requirement)
    return entries


def _version_of(filename: str, name: str) -> Version | None:
    """The version of a Linux (or any-platform) wheel of `name`; None for any other file."""
    try:
        wheel_name, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None  # a source archive, or not a distribution
    if wheel_name != name or all(t.platform.startswith(ELSEWHERE) for t in tags):
        return None
    return version


def hashes(requirement: Requirement) -> list[str]:
    """sha256 of each file of the pinned version the index serves (its JSON simple API)."""
    name = canonicalize_name(requirement.name)
    [pin] = requirement.specifier
    answer = requests.get(
        f"{INDEX}/{name}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        timeout=60,
    )
    answer.raise_for_status()
    files = answer.json()["files"]
    found = sorted(
        f["hashes"]["sha256"]
        for f in files
        if "sha256" in f.get("hashes", {})
        and _version_of(f["filename"], name) == Version(pin.version)
    )
    if not found:
        sys.exit(
            f"{INDEX} serves no Linux wheel of {requirement.name}=={pin.version}: the image "
            "installs wheels only; pin a version that has one"
        )
    return found


def main() -> None:
    entries, lines = read(LOCK), []
    for entry in entries:
        if isinstance(entry, str):
            lines.append(entry)
            continue
        digests = hashes(entry)
        lines.append(" \\\n".join([str(entry), *(f"    --hash=sha256:{d}" for d in digests)]))
    LOCK.write_text("\n".join(lines) + "\n")
    print(f"{sum(not isinstance(e, str) for e in entries)} pins hashed in {LOCK}")


if __name__ == "__main__":
    main()
