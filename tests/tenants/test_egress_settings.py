"""The ranges job pods may not reach, as a platform admin writes them in the environment."""

import os
import subprocess
import sys

from tests.processes import ROOT, settings_under


def test_closed_ranges_are_read_as_networks():
    deny = settings_under(["TENANT_EGRESS_DENY"], TENANT_EGRESS_DENY="169.254.169.254, 10.0.0.0/8")
    assert deny == [["169.254.169.254/32", "10.0.0.0/8"]]


def test_a_range_that_is_not_one_stops_the_portal_saying_what_to_write():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "TENANT_EGRESS_DENY": "10.0.0.1/8",  # host bits set: which range was meant?
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "TENANT_EGRESS_DENY holds address ranges such as 10.0.0.0/8" in done.stderr
    assert "10.0.0.1/8 has host bits set" in done.stderr
