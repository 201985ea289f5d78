"""Why a job waits, read from one sweep of its namespace's telling Events (the API server
answers the field-selected LISTs here as it would)."""

from jobs import pending
from k8s_adapters.events import telling_events
from k8s_adapters.waiting import claim_messages, evictions


def event(kind, name, type_, reason, message, at):
    return {
        "involvedObject": {"kind": kind, "name": name},
        "type": type_,
        "reason": reason,
        "message": message,
        "lastTimestamp": f"2026-12-04T10:00:{at:02d}Z",
    }


class Namespace:
    """A namespace's Events, answering LISTs by field selector as the API server does."""

    def __init__(self, events):
        self.events = events

    def list(self, api_version, kind, *, namespace=None, fields=None):
        assert (api_version, kind) == ("v1", "Event")
        fields = fields or {}
        return [e for e in self.events if all(_field(e, k) == v for k, v in fields.items())]


def _field(event, path):
    for key in path.split("."):
        event = event.get(key, {})
    return event


def test_a_claim_with_no_storage_class_says_so():
    # The PV binder says this as a Normal event; it was never read, and the job said only
    # that it waits for its volume.
    said = "no persistent volumes available for this claim and no storage class is set"
    events = telling_events(
        Namespace(
            [
                event("PersistentVolumeClaim", "a-workspace", "Normal", "FailedBinding", said, 1),
                event("Pod", "a-main-0", "Normal", "Scheduled", "assigned to node-1", 2),
            ]
        ),
        "tenant-a",
    )
    assert [e.reason for e in events] == ["FailedBinding"]  # a scheduled pod tells nothing
    messages = claim_messages(["a-workspace"], events)
    assert pending.explain(messages).startswith("The job's volume cannot be created")


def test_each_object_keeps_its_newest_telling_events_only():
    # A PodGroup waiting for a full queue is told so thousands of times.
    events = telling_events(
        Namespace(
            [event("PodGroup", "g", "Warning", "Unschedulable", f"try {n}", n) for n in range(30)]
            + [event("Pod", "p", "Warning", "FailedScheduling", "0/3 nodes", 0)]
        ),
        "tenant-a",
    )
    told = [e.message for e in events if e.kind == "PodGroup"]
    assert told == ["try 29", "try 28", "try 27", "try 26", "try 25"]
    assert [e.message for e in events if e.kind == "Pod"] == ["0/3 nodes"]


def test_evictions_are_the_jobs_own_pods_not_those_of_a_job_whose_name_starts_alike():
    evicted = "Pod is evicted, because of reclaim"
    namespace = Namespace(
        [
            event("Pod", "train-2-worker-0", "Warning", "Evict", evicted, 9),  # another job's
            event("Pod", "train-worker-1", "Warning", "Evict", evicted, 5),
            event("Pod", "train-worker-x", "Warning", "Evict", evicted, 7),  # no replica index
            event("PodGroup", "train-worker-0", "Warning", "Evict", evicted, 8),
        ]
    )
    found = evictions(namespace, "ns", "train", ["master", "worker"])
    assert [e.name for e in found] == ["train-worker-1"]


def test_the_current_reason_wins_over_an_older_one_that_has_passed():
    # The queue was full a while ago (an Event kept for an hour); now the job is in the queue
    # and no node has free GPUs (the PodGroup's condition, first). The rule order put the old
    # reason first for as long as its Event lasted.
    now = "0/10 nodes are unavailable: 10 Insufficient nvidia.com/gpu."
    before = "queue resource quota insufficient: insufficient nvidia.com/gpu"
    assert pending.explain([now, before]).startswith("Not enough free GPUs on any node")
    assert pending.explain([before, now]).startswith("The tenant's Volcano queue has no GPUs")


def test_a_job_launched_again_under_its_name_is_not_told_the_old_ones_reasons():
    from k8s_adapters.events import about

    raw = [
        {**event("Job", "train", "Warning", "FailedCreate", "exceeded quota: old", 1)},
        {**event("Job", "train", "Warning", "FailedCreate", "exceeded quota: new", 2)},
    ]
    raw[0]["involvedObject"]["uid"], raw[1]["involvedObject"]["uid"] = "uid-old", "uid-new"
    events = telling_events(Namespace(raw), "tenant-a")
    assert [e.message for e in about(events, "Job", ["train"], ["uid-new"])] == [
        "exceeded quota: new"
    ]
    assert len(about(events, "Job", ["train"])) == 2  # without uids, all of the name
