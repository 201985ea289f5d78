"""Until when a deleted job's pods still count in its tenant's ResourceQuota: as Kubernetes'
pod quota evaluator counts them, so the portal's admission lets the next job in no sooner and
no later than the ResourceQuota does."""

from datetime import UTC, datetime, timedelta

from k8s_adapters.pods import quota_held_until

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)


class Pods:
    """The one read `quota_held_until` makes: the job's pods, by Volcano's job label."""

    def __init__(self, *pods):
        self.pods, self.asked = list(pods), []

    def list(self, api_version, kind, *, namespace, labels):
        self.asked.append((api_version, kind, namespace, labels))
        return self.pods


def pod(phase="Running", deleted_in=None, grace=30):
    meta = {"name": "p"}
    if deleted_in is not None:
        stamp = NOW + timedelta(seconds=deleted_in)
        meta |= {
            "deletionTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "deletionGracePeriodSeconds": grace,
        }
    return {"metadata": meta, "status": {"phase": phase}}


def test_no_pods_hold_nothing_and_only_the_jobs_pods_are_read():
    cluster = Pods()
    assert quota_held_until(cluster, "tenant-a", "train", NOW) is None
    assert cluster.asked == [("v1", "Pod", "tenant-a", {"volcano.sh/job-name": "train"})]


def test_a_pod_not_yet_deleted_holds_for_as_long_as_it_runs():
    assert quota_held_until(Pods(pod()), "ns", "j", NOW) > NOW + timedelta(hours=1)


def test_a_stopping_pod_holds_until_its_deletion_time_plus_its_grace_period():
    # Deleted 5 s ago with 30 s of grace: its deletion time is 25 s ahead, and the quota
    # counts it 30 s past that.
    held = quota_held_until(Pods(pod(deleted_in=25)), "ns", "j", NOW)
    assert held == NOW + timedelta(seconds=55)


def test_the_longest_stopping_pod_decides():
    pods = Pods(pod(deleted_in=1, grace=2), pod(deleted_in=20, grace=30))
    assert quota_held_until(pods, "ns", "j", NOW) == NOW + timedelta(seconds=50)


def test_a_pod_stuck_past_its_grace_on_a_lost_node_no_longer_holds():
    assert quota_held_until(Pods(pod(deleted_in=-40, grace=30)), "ns", "j", NOW) is None


def test_ended_pods_hold_nothing_even_before_they_are_removed():
    pods = Pods(pod(phase="Succeeded"), pod(phase="Failed", deleted_in=10))
    assert quota_held_until(pods, "ns", "j", NOW) is None
