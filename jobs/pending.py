"""Why a job is pending, in plain words, from what the scheduler and the controllers said (the
PodGroup's conditions and the Events around the job, gathered by k8s_adapters.waiting)."""

import re

RESOURCE_WORDS = {"nvidia.com/gpu": "GPUs", "cpu": "CPU", "memory": "memory"}

RULES = [
    (
        ("exceeded quota",),
        "The tenant's ResourceQuota refused some of the job's pods, so the job is only partly "
        "created. The quota may still count the pods of a job that ended or was deleted a "
        "moment ago: then Volcano creates the rest once those are gone. If this lasts, the "
        "portal's own admission and the quota disagree (was the quota edited by hand?), and a "
        "platform admin should re-sync the tenant.",
    ),
    (
        ("no storage class is set",),
        "The job's volume cannot be created: the cluster has no default StorageClass and the "
        "template names none. A platform admin sets a default StorageClass, or the template's "
        "storage class.",
    ),
    (
        ("storageclass.storage.k8s.io",),
        "The job's volume asks for a StorageClass that does not exist; pick the template's "
        "storage class from the ones the cluster has.",
    ),
    (
        ("waiting for a volume to be created", "external provisioner"),
        "Waiting for the cluster's storage provisioner to create the job's volume.",
    ),
    (
        ("insufficient nvidia.com/gpu",),
        "Not enough free GPUs on any node right now; the job waits until enough GPUs are free at "
        "once for all its pods (gang scheduling).",
    ),
    (
        (
            "didn't match node selector",
            "node affinity",
            "didn't match Pod's node affinity/selector",
        ),
        "No node has the requested GPU product; pick another product or none.",
    ),
    (
        ("insufficient cpu", "insufficient memory"),
        "Not enough free CPU or memory on the GPU nodes right now.",
    ),
    (
        ("untolerated taint", "had taint"),
        "The free nodes carry taints this job does not tolerate (for example cordoned or "
        "maintenance nodes).",
    ),
    (
        ("unbound immediate persistentvolumeclaims",),
        "A volume of the job is not ready yet (its PersistentVolumeClaim is not bound).",
    ),
    (
        ("network topology", "hypernode"),
        "No group of nodes under one network switch has room for all of the job's pods at once "
        "(the template asks for topology-aware placement).",
    ),
    (
        ("not enough", "unschedulable", "gang"),
        "The scheduler cannot place all of the job's pods at once yet.",
    ),
]
QUEUE_FULL = re.compile(r"queue resource quota insufficient:?\s*(?P<what>.*)", re.IGNORECASE)


EVICTED = {
    "reclaim": "Volcano reclaimed this job's GPUs for another tenant that is within its "
    "deserved share: this tenant had borrowed GPUs beyond its own share. The job waits, and runs "
    "again when GPUs are free.",
    "preempt": "A job of higher priority preempted this one. The job waits, and runs again when "
    "GPUs are free.",
}

WAITING_FOR_SCHEDULER = "Waiting for the Volcano scheduler to admit the job."
WAITING_FOR_VOLUME = "Waiting for the job's volume to be created before its pods are."
STORAGE_RELEASING = (
    "The tenant's ResourceQuota has no room for the job's volume yet: it still counts a volume "
    "being deleted, and the job goes ahead once that is gone. If this lasts, the quota and the "
    "portal disagree (was the quota edited by hand?); a platform admin should re-sync the tenant."
)

QUOTA_BEHIND = (
    "The tenant's ResourceQuota in the cluster allows less storage or fewer volumes than the "
    "tenant's quota in the portal (just raised, or lowered by hand): the portal is setting it "
    "again, and the job goes ahead then. If this lasts, a platform admin should look at the "
    "tenant's sync status."
)


def explain(messages, default=WAITING_FOR_SCHEDULER):
    """The first message a rule explains, in plain words, else the first message raw, else
    `default`. Messages come most telling first (the PodGroup's conditions as they are now,
    then Events, newest first): an older reason that has passed never wins over the current.
    Only the catch-all (the gang does not fit yet, which Volcano's condition says whatever the
    cause) waits for no message to say more."""
    texts = [m for m in messages if m]
    *specific, generic = RULES  # the last one says only that the gang does not fit yet
    for rules in (specific, [generic]):
        for text in texts:
            queue = _queue_full([text]) if rules is specific else ""
            if queue:
                return queue
            lowered = text.lower()
            for needles, explanation in rules:
                if any(needle.lower() in lowered for needle in needles):
                    return f"{explanation} (cluster: {text})"
    if texts:
        return texts[0]
    return default


def _queue_full(texts):
    """Volcano says so only in Events on the PodGroup: the queue's capability (the tenant's
    quota) is used up for the resources it names."""
    for text in texts:
        match = QUEUE_FULL.search(text)
        if match:
            found = re.findall(r"insufficient ([\w./-]+)", match.group("what"))
            words = [RESOURCE_WORDS.get(r, r) for r in found] or ["resources"]
            return (
                f"The tenant's Volcano queue has no {' or '.join(words)} left to give right now; "
                "the job starts when other jobs of the tenant finish or borrowed resources are "
                f"reclaimed. (cluster: {text})"
            )
    return ""


def evicted(message):
    """Why the scheduler evicted a running pod of the job ("Pod is evicted, because of reclaim"),
    in plain words."""
    match = re.search(r"because of (\w+)", message)
    cause = match.group(1).lower() if match else ""
    return f"{EVICTED.get(cause, 'The scheduler evicted a pod of this job.')} (cluster: {message})"
