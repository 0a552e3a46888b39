from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "serving"
    verbose_name = "Serving: vLLM replicas, adapter registry, gateway, gates, canaries"
