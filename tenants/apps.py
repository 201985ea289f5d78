from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"

    def ready(self):
        from . import signals  # noqa: F401  (SSO group mapping at every login)
