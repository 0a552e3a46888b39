from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants: organizations, privacy, encrypted recording and feedback"

    def ready(self):
        from tenants.api import schema  # noqa: F401  (registers the OpenAPI extensions)
