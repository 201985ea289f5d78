"""GPU Portal's Python SDK: describe a job, submit it, wait for it, open its endpoints."""

from .client import Client, JobEnded, PortalError
from .models import Expose, Task, VolcanoJob

__all__ = ["Client", "Expose", "JobEnded", "PortalError", "Task", "VolcanoJob"]
