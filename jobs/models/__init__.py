from .endpoint import Endpoint, EndpointMode, HostLabel, LaunchedName
from .job import Job, JobEvent
from .template import JobTemplate, JobTemplateVersion
from .volume import DataVolume

__all__ = [
    "DataVolume",
    "Endpoint",
    "EndpointMode",
    "HostLabel",
    "Job",
    "JobEvent",
    "JobTemplate",
    "JobTemplateVersion",
    "LaunchedName",
]
