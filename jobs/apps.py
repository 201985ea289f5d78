from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self):
        from tenants import services as tenant_services

        from .services import active_jobs_description

        tenant_services.archive_blockers.append(active_jobs_description)
