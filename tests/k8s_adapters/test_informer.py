"""The collector's informers: a change the handler failed on is handed to it again, and a watch
that hears nothing is given up, not waited on for good."""

import threading

from k8s_adapters.errors import TransientK8sError
from k8s_adapters.informer import Informer, listing


def job(name, phase):
    return {"metadata": {"name": name, "namespace": "t", "resourceVersion": "1"}, "phase": phase}


class Cluster:
    """Lists what `listed` holds; each watch asks `watches` for its events (or raises)."""

    def __init__(self, listed, watches=()):
        self.listed, self.watches, self.asked = listed, list(watches), []

    def list_with_version(self, api_version, kind, *, labels=None, namespace=None):
        return list(self.listed), "1"

    def watch(self, api_version, kind, **options):
        self.asked.append(options)
        step = self.watches.pop(0) if self.watches else TransientK8sError("no answer")
        if isinstance(step, Exception):
            raise step
        yield from step


def informer(cluster, on_update):
    return Informer(
        cluster,
        "batch.volcano.sh/v1alpha1",
        "Job",
        reduce=lambda obj: {"name": obj["metadata"]["name"], "phase": obj["phase"]},
        on_change=lambda: None,
        on_update=on_update,
    )


def test_a_change_the_handler_failed_on_is_handed_to_it_again():
    # The database was down as a job ended: its end was dropped, the store moved on, and the
    # next list found nothing new; the job was later taken as deleted outside the portal.
    seen, failing = [], [True]

    def on_update(old, new):
        if failing[0]:
            failing[0] = False
            raise ConnectionError("database down")
        seen.append((old and old["phase"], new and new["phase"]))

    cluster = Cluster([job("train", "Running")])
    watched = informer(cluster, on_update)
    watched.relist()
    assert watched.retry
    assert watched.store == {}
    watched.relist()
    assert seen == [(None, "Running")]
    assert watched.store["t/train"]["phase"] == "Running"

    cluster.watches = [[("MODIFIED", job("train", "Completed"))]]
    failing[0] = True
    watched.retry = False
    watched._watch("1")
    assert watched.retry
    assert watched.store["t/train"]["phase"] == "Running"
    cluster.listed = [job("train", "Completed")]
    watched.relist()
    assert seen[-1] == ("Running", "Completed")


def test_a_handler_can_tell_what_a_list_found_from_what_a_watch_heard():
    # At start a list hands the handler every object: the collector sends their runs behind
    # those of changes, as a resync's, so a restart does not hold up launches.
    seen = []
    cluster = Cluster([job("a", "Running")], watches=[[("MODIFIED", job("a", "Completed"))]])
    watched = informer(cluster, lambda old, new: seen.append((new["phase"], listing())))
    watched._watch(watched.relist())
    assert seen == [("Running", True), ("Completed", False)]
    assert not listing()


def test_a_watch_that_hears_nothing_is_given_up_and_listed_again():
    # A dead peer behind a load balancer sends nothing; a read without a deadline waited for
    # good while the collector published its stale store as fresh.
    cluster = Cluster([job("train", "Running")])
    watched = informer(cluster, lambda old, new: None)
    stop = threading.Event()
    runner = threading.Thread(target=watched.run, args=(stop,), daemon=True)
    runner.start()
    try:
        deadline = threading.Event()
        while len(cluster.asked) < 2 and not deadline.wait(0.05):
            pass
    finally:
        stop.set()
        runner.join(timeout=30)
    assert not runner.is_alive()
    assert cluster.asked[0]["read_timeout"] == cluster.asked[0]["timeout"] + 30
    assert len(cluster.asked) >= 2  # the failed watch was followed by a list and a new watch


class Waits(threading.Event):
    """A stop event that records how long the informer waits, and stops it after `times`."""

    def __init__(self, times):
        super().__init__()
        self.waited, self.times = [], times

    def wait(self, timeout=None):
        self.waited.append(timeout)
        if len(self.waited) >= self.times:
            self.set()
        return self.is_set()


def test_a_watch_refused_at_once_waits_longer_each_time():
    # Throttled (429) or behind a proxy that does not stream, every watch fails at once: the
    # backoff went back to half a second after each list, so the informer listed every object
    # of its kind twice a second for as long as that lasted.
    cluster = Cluster([job("train", "Running")])
    stop = Waits(times=5)
    informer(cluster, lambda old, new: None).run(stop)
    assert stop.waited == [0.5, 1.0, 2.0, 4.0, 8.0]


def test_an_object_that_cannot_be_read_is_kept_as_last_read_not_its_whole_kind_dropped():
    # One ConfigMap with odd data made every list of the kind fail: the kind never synced. Nor
    # is an object gone odd taken as deleted (a claim's handler would count its storage free).
    def reduce(obj):
        if obj["phase"] == "odd":
            raise AttributeError("'str' object has no attribute 'get'")
        return {"phase": obj["phase"]}

    cluster = Cluster([job("train", "Running"), job("strange", "odd")])
    watched = Informer(cluster, "v1", "ConfigMap", reduce=reduce, on_change=lambda: None)
    watched.relist()
    assert watched.synced
    assert watched.store == {"t/train": {"phase": "Running"}}
    told = []
    watched.on_update = lambda old, new: told.append((old, new))
    cluster.watches = [[("MODIFIED", job("train", "odd"))]]
    watched._watch("1")
    cluster.listed = [job("train", "odd")]
    watched.relist()
    assert watched.store == {"t/train": {"phase": "Running"}}
    assert told == []


def test_a_kind_the_collector_cannot_read_is_said_once_it_has_not_been_current_for_a_while():
    """A missing CRD or permission left the console showing a kind's last state as current."""
    from k8s_adapters.errors import PermanentK8sError
    from k8s_adapters.informer import unheard

    class Refusing(Cluster):
        def list_with_version(self, *args, **kwargs):
            raise PermanentK8sError("the server could not find the requested resource", status=404)

    blind = informer(Refusing([]), lambda old, new: None)
    stop = Waits(times=1)
    blind.run(stop)
    said = unheard(blind, now=1e12, after=120)
    assert said["subject"] == "Job (never listed)"
    assert "could not find the requested resource" in said["cause"]

    seen = informer(Cluster([job("train", "Running")]), lambda old, new: None)
    seen.relist()
    seen.error = "TransientK8sError: no answer"  # a watch that just failed
    assert unheard(seen, now=seen.heard_at + 5, after=120) is None
    assert unheard(seen, now=seen.heard_at + 300, after=120)["subject"] == "Job (not current)"
