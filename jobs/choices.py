from django.db import models


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    SUBMITTING = "submitting", "Submitting"
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    ERROR = "error", "Error"


# States in which a job holds (or is about to hold) its GPUs in the cluster.
HOLDING = (JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING, JobState.ERROR)
FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
ACTIVE = (JobState.QUEUED, *HOLDING)


class Protocol(models.TextChoices):
    HTTP = "http", "HTTP"
    TCP = "tcp", "TCP"
    SSH = "ssh", "SSH"


POLICY_EVENTS = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
POLICY_ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
    "RestartPartition",
)

# Volcano job phase -> portal state.
PHASES = {
    "Pending": JobState.PENDING,
    "Inqueue": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Restarting": JobState.RUNNING,
    "Completing": JobState.RUNNING,
    "Terminating": JobState.RUNNING,
    "Aborting": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED,
    "Failed": JobState.FAILED,
    "Terminated": JobState.FAILED,
    "Aborted": JobState.FAILED,
}
