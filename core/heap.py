"""Long-running processes (the web workers, Celery workers and the collector) take what they
loaded at start out of the garbage collector's full collections."""

import gc


def freeze_loaded() -> int:
    """Move every object alive now into the collector's permanent generation; returns how many
    it holds. A process of the portal holds about 110,000 objects once loaded (Django, the apps,
    the Kubernetes client's models), and each full collection scanned them all with the process
    stopped: 40 to 100 ms, which the web request, reconcile run or watch event that met one
    waited out (measured in a time-to-Running benchmark: a web process's and the collector's
    full collections of 68 and 101 ms during the run; none over 8 ms once frozen). Frozen
    objects are still freed by reference counting, only no longer scanned for cycles; garbage
    is collected first, so none is frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
