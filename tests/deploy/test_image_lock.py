"""The image installs exactly the files its lock names: each dependency pinned to one version,
with the hashes of that version's files (pip's hash-checking mode, which the image's build runs
in; `make test` builds the image from this lock)."""

import re
from pathlib import Path

from packaging.requirements import Requirement

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
