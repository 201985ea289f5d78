"""Long-running processes freeze what they loaded, so full garbage collections stop scanning
it (core.heap): a full collection of a loaded process took 40 to 100 ms, with the process
stopped, in the middle of a web request or a reconcile run."""

import gc
import subprocess
import sys
import weakref

from core.heap import freeze_loaded
from tests.processes import ROOT


class Node:
    pass


def test_freezing_collects_garbage_first_and_keeps_what_is_alive_working():
    cycle = Node()
    cycle.self = cycle  # garbage only a cyclic collection can free
    gone = weakref.ref(cycle)
    alive = {"kept": [1, 2, 3]}
    del cycle
    try:
        frozen = freeze_loaded()
        assert gone() is None  # collected, not frozen
        assert frozen >= gc.get_freeze_count() > 0
        alive["kept"].append(4)  # frozen objects are still ordinary objects
        assert alive == {"kept": [1, 2, 3, 4]}
    finally:
        gc.unfreeze()  # the test process keeps its usual collections


def test_the_web_application_is_frozen_once_loaded_with_every_view_imported():
    code = (
        "import gc, sys, portal.wsgi;"
        "print(gc.get_freeze_count(), 'jobs.views' in sys.modules, 'tenants.views' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    frozen, jobs_views, tenants_views = out.stdout.split()
    assert int(frozen) > 50_000  # Django, the apps and the Kubernetes client's models
    assert (jobs_views, tenants_views) == ("True", "True")
