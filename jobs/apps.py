from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self):
        from networking import services as network_services
        from tenants import services as tenant_services

        from .admission import quota_conflicts
        from .services import (
            active_jobs_description,
            data_volumes_description,
            pool_jobs_description,
            reservation_job_description,
        )

        tenant_services.archive_blockers.append(active_jobs_description)
        tenant_services.archive_blockers.append(data_volumes_description)
        tenant_services.quota_floors.append(quota_conflicts)
        network_services.delete_blockers.append(pool_jobs_description)
        network_services.release_blockers.append(reservation_job_description)
