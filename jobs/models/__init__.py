from .endpoint import Endpoint, EndpointMode
from .job import Job, JobEvent
from .template import JobTemplate, JobTemplateVersion
from .volume import DataVolume

__all__ = [
    "DataVolume",
    "Endpoint",
    "EndpointMode",
    "Job",
    "JobEvent",
    "JobTemplate",
    "JobTemplateVersion",
]
