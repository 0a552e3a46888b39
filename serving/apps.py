from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "serving"
    verbose_name = "Serving: vLLM replicas, adapter registry, gateway, gates, canaries"

    def ready(self):
        from serving.deployments import org_adapters_unload
        from serving.registry import org_adapters_destroy
        from tenants.signals import organization_deleted

        organization_deleted.connect(org_adapters_unload, dispatch_uid="serving.org_adapters_unload")
        organization_deleted.connect(org_adapters_destroy, dispatch_uid="serving.org_adapters_destroy")
