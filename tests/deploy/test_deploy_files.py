"""compose.yaml and the Dockerfile run the services of deploy/services.py, with its settings:
what `scripts/cluster` tries locally is what is deployed."""

import json
import re
from pathlib import Path

import pytest
import yaml

from deploy import services

DEPLOY = Path(services.__file__).parent
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
DOCKERFILE = (DEPLOY / "Dockerfile").read_text()


def image_env() -> dict[str, str]:
    env_line = next(line for line in DOCKERFILE.splitlines() if line.startswith("ENV "))
    return dict(pair.split("=", 1) for pair in env_line.split()[1:])


def test_every_platform_container_gets_exactly_the_settings_the_cluster_gives_its_processes():
    names = set(COMPOSE["x-platform"]["environment"]) | (set(image_env()) - {"PYTHONUNBUFFERED"})
    assert names == set(services.SETTINGS)
    assert image_env()["DJANGO_SETTINGS_MODULE"] == services.PRODUCTION_SETTINGS_MODULE


def test_every_platform_container_runs_the_platform_image_with_its_settings():
    platform = {name for name, service in COMPOSE["services"].items() if service.get("image") == "orgspec"}
    assert platform == {"migrate", "web", "worker", "training-worker", "scheduler"}
    for name in platform:
        assert COMPOSE["services"][name]["environment"] == COMPOSE["x-platform"]["environment"], name


@pytest.mark.parametrize(("service", "command"), [
    ("migrate", services.migrate()),
    ("web", services.web()),
    ("worker", services.worker("celery")),
    ("training-worker", services.worker("training")),
    ("scheduler", services.scheduler()),
])
def test_each_container_runs_the_services_command(service, command):
    assert COMPOSE["services"][service]["command"] == command


def test_the_image_starts_the_web_server_by_default():
    cmd = next(line for line in DOCKERFILE.splitlines() if line.startswith("CMD "))
    assert json.loads(cmd[len("CMD "):]) == services.web()


def test_the_replica_runs_what_the_cluster_runs_with_the_settings_names_of_the_platform():
    vllm = COMPOSE["services"]["vllm"]
    environment = COMPOSE["x-platform"]["environment"]
    options = services.vllm(model=Path(environment["PLATFORM_BASE_MODEL_DIR"]), served_name=environment["PLATFORM_BASE_MODEL_NAME"])
    assert vllm["command"] == services.vllm_arguments(options)
    assert environment["PLATFORM_VLLM_URLS"] == "http://vllm:8000"
    assert vllm["environment"]["VLLM_API_KEY"] == environment["PLATFORM_VLLM_API_KEY"]
    assert vllm["environment"]["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == options.environment()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"]


def test_images_are_pinned():
    for name, service in COMPOSE["services"].items():
        if "image" in service and service["image"] != "orgspec":
            assert re.fullmatch(r"[\w./-]+:[\w.-]+", service["image"]) and not service["image"].endswith(":latest"), name


def test_the_replicas_read_adapters_at_the_path_the_platform_writes_them():
    adapters_root = COMPOSE["x-platform"]["environment"]["PLATFORM_ADAPTERS_ROOT"]
    assert any(volume.startswith(f"adapters:{adapters_root}") for volume in COMPOSE["services"]["vllm"]["volumes"])
    assert f"adapters:{adapters_root}" in COMPOSE["x-platform"]["volumes"]
