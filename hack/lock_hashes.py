"""Write the hashes of every file the package index serves for each pin of the image's lock
(deploy/image/requirements.lock), so the image's `pip install` takes those files and no other
(pip's hash-checking mode): a release replaced on the index, or a mirror serving other bytes,
fails the build instead of entering the image.

    .venv/bin/python hack/lock_hashes.py    (after changing a pin)

Every Linux wheel and the source archive of the pinned version are hashed (any Python, any
Linux architecture: the image's base decides which one pip picks); Windows and macOS wheels are
left out. The index is PIP_INDEX_URL's, or PyPI's.
"""

import os
import re
import sys
from pathlib import Path

import requests
from packaging.requirements import Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

LOCK = Path(__file__).resolve().parent.parent / "deploy/image/requirements.lock"
INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
ELSEWHERE = ("win", "macosx", "ios", "android")  # platforms no image runs on


def read(lock: Path) -> tuple[list[str], list[str]]:
    """The lock's comment lines, and its requirements (pin and marker, hashes dropped)."""
    comments, pins = [], []
    joined = re.sub(r"\\\n\s*", " ", lock.read_text())
    for line in joined.splitlines():
        if line.startswith("#") or not line.strip():
            if not pins:  # the header
                comments.append(line)
            continue
        pins.append(re.sub(r"\s*--hash=\S+", "", line).strip())
    return comments, pins


def _version_of(filename: str, name: str):
    try:
        wheel_name, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        try:
            sdist_name, version = parse_sdist_filename(filename)
        except InvalidSdistFilename:
            return None
        return version if sdist_name == name else None
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
        sys.exit(f"{INDEX} serves no file of {requirement.name}=={pin.version}")
    return found


def main() -> None:
    comments, pins = read(LOCK)
    lines = [*comments]
    for pin in pins:
        digests = hashes(Requirement(pin))
        lines.append(" \\\n".join([pin, *(f"    --hash=sha256:{d}" for d in digests)]))
    LOCK.write_text("\n".join(lines) + "\n")
    print(f"{len(pins)} pins hashed in {LOCK}")


if __name__ == "__main__":
    main()
