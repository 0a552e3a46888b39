from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "serving"
    verbose_name = "Serving: vLLM replicas, adapter registry, gateway, gates, canaries"

    def ready(self):
        from django.conf import settings

        from serving import vllm_client
        from serving.deployments import org_adapters_unload
        from serving.registry import org_adapters_destroy
        from serving.taint import adapters_taint
        from tenants.signals import content_erased, organization_deleted

        organization_deleted.connect(org_adapters_unload, dispatch_uid="serving.org_adapters_unload")
        organization_deleted.connect(org_adapters_destroy, dispatch_uid="serving.org_adapters_destroy")
        content_erased.connect(adapters_taint, dispatch_uid="serving.adapters_taint")
        vllm_client.use_api_key(settings.SERVING_VLLM_API_KEY)
