from .job import Job, JobEvent
from .template import JobTemplate, JobTemplateVersion
from .volume import DataVolume

__all__ = ["DataVolume", "Job", "JobEvent", "JobTemplate", "JobTemplateVersion"]
