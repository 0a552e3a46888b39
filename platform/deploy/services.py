"""The platform's services: the command each runs and the settings every one of them gets.

`scripts/cluster` runs them as processes on one machine, `compose.yaml` beside this file as
containers; tests/deploy/test_deploy_files.py holds the two to this module, so that what is
tried locally is what is deployed. Commands name their program (`python`, `gunicorn`,
`celery`) as a container runs it; the cluster runs each with the virtual environment's Python.
"""

from pathlib import Path

from serving.vllm_process import VllmOptions

# Every platform service (migrate, web, workers, scheduler) gets exactly these, and nothing else
# decides how it runs. Secrets among them come from the deployment's secret store (.env here).
SETTINGS = (
    "DJANGO_SETTINGS_MODULE",  # controlplane.settings.production: refuses to start without the secrets below
    "PYTHONPATH",
    "DJANGO_SECRET_KEY",
    "DJANGO_ALLOWED_HOSTS",
    "DJANGO_SECURE_COOKIES",  # false only where the console is reached over plain HTTP (loopback)
    "DATABASE_URL",
    "CELERY_BROKER_URL",  # Redis; also where the per-organization limits are shared
    "PLATFORM_MASTER_KEYS",
    "PLATFORM_PUBLIC_URL",
    "PLATFORM_DATA_DIR",
    "PLATFORM_ADAPTERS_ROOT",  # shared by the workers (write) and the replicas (read), at one path
    "PLATFORM_BASE_MODEL_DIR",
    "PLATFORM_BASE_MODEL_NAME",
    "PLATFORM_VLLM_URLS",
    "PLATFORM_VLLM_API_KEY",
)

PRODUCTION_SETTINGS_MODULE = "controlplane.settings.production"


def migrate() -> list[str]:
    """Once per release, before the others start."""
    return ["python", "manage.py", "migrate"]


def web(*, bind: str = "0.0.0.0:8000", workers: int = 2) -> list[str]:
    """The REST API, the console and the gateway: one gunicorn master, `workers` uvicorn
    workers (one per core), each restarted by the master if it dies."""
    return ["gunicorn", "controlplane.asgi:application", "--worker-class", "uvicorn_worker.UvicornWorker",
            "--workers", str(workers), "--bind", bind, "--graceful-timeout", "20", "--no-control-socket"]


def worker(queue: str) -> list[str]:
    """A Celery worker: `celery` runs cycles, gates and housekeeping; `training` trains (one per
    accelerator). One task at a time each."""
    return ["celery", "-A", "controlplane", "worker", "--loglevel=INFO", "--concurrency=1", "-Q", queue, "-n", f"{queue}@%h"]


def scheduler(*, schedule: str = "/tmp/celerybeat-schedule") -> list[str]:
    """Celery beat: exactly one per deployment."""
    return ["celery", "-A", "controlplane", "beat", "--loglevel=INFO", f"--schedule={schedule}"]


def vllm(*, model: Path, served_name: str, api_key: str | None = None) -> VllmOptions:
    """A vLLM replica, with what the platform's settings expect of it (production.py's defaults:
    8 adapters a batch, rank 16)."""
    return VllmOptions(model=model, served_name=served_name, max_loras=8, max_lora_rank=16, api_key=api_key)


def vllm_arguments(options: VllmOptions, *, port: int = 8000) -> list[str]:
    """What follows the server's module on its command line (a container's `command`)."""
    command = options.command("0.0.0.0", port)
    return command[command.index("vllm.entrypoints.openai.api_server") + 1:]
