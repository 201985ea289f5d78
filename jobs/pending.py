"""Why a job is pending, in plain words, from its PodGroup's conditions and its events."""

RULES = [
    (
        ("queue resource quota insufficient", "exceed queue", "overused", "queue capability"),
        "The tenant's Volcano queue has no GPUs left to give right now; the job starts when "
        "other jobs in the queue finish or borrowed GPUs are reclaimed.",
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
        ("insufficient nvidia.com/gpu",),
        "Not enough free GPUs on any node right now; the job waits until enough GPUs are free at "
        "once for all its pods (gang scheduling).",
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
        ("persistentvolumeclaim", "unbound immediate persistentvolumeclaims", "pvc"),
        "A volume of the job is not ready yet (its PersistentVolumeClaim is not bound).",
    ),
    (
        ("not enough", "unschedulable", "gang"),
        "The scheduler cannot place all of the job's pods at once yet.",
    ),
]


def explain(messages):
    """The first rule matching any message, else the raw message, else a generic line."""
    texts = [m for m in messages if m]
    lowered = " | ".join(texts).lower()
    for needles, explanation in RULES:
        if any(needle.lower() in lowered for needle in needles):
            return f"{explanation} (scheduler: {texts[0]})"
    if texts:
        return texts[0]
    return "Waiting for the Volcano scheduler to admit the job."
