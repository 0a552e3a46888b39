"""What tests build their data from: tenants (an organization with its owner's key and an
authenticated API client), interactions recorded through the API or served with sampled
tokens, feedback on them, training runs, and folders that pass for trained adapters.

The fixtures that hand these out (acme, globex, ...) are in the conftest files; a test that
builds one more of them imports it from here.
"""

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from rest_framework.test import APIClient

from serving import registry
from serving.models import AdapterVersion
from tenants.feedback import FeedbackIn, feedback_ingest
from tenants.models import Interaction, Organization
from tenants.organizations import api_key_create, org_create
from tenants.recording import InteractionContent, SampledTokens, interaction_record
from training import runs
from training.models import TrainingRun

# Tenants ------------------------------------------------------------------------------------


@dataclass
class Tenant:
    org: Organization
    key: str  # the owner's key
    client: APIClient  # authenticated with the owner's key

    def client_with_role(self, role: str) -> APIClient:
        _, key = api_key_create(org=self.org, name=f"{role} key", role=role, actor="test")
        return api_client(key)


def api_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def make_tenant(name: str, **policy) -> Tenant:
    org, key = org_create(name=name, owner_email=f"owner@{name.lower()}.example", policy=policy or None)
    return Tenant(org=org, key=key, client=api_client(key))


# Interactions and feedback ------------------------------------------------------------------


def record(client: APIClient, text: str = "Task: Return the sum of the numbers in a list.", completion: str = "<ask>Which file?</ask>", **extra) -> str:
    """Record an interaction through the public API and return its id."""
    body = {"messages": [{"role": "user", "content": text}], "completion": completion, **extra}
    response = client.post("/api/v1/interactions", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def served(org, *, adapter=None, prompt=(1, 2, 3), text="<ask>Which file?</ask>", task=None, feedback=("edit_persisted",),
           latency_ms=None) -> Interaction:
    """An interaction as the gateway records it (with the tokens it sampled), and its feedback."""
    tokens = SampledTokens(prompt_ids=list(prompt), completion_ids=[7, 8], logprobs=[-0.5, -0.25])
    interaction = interaction_record(org=org, content=InteractionContent([{"role": "user", "content": "hi"}], text, tokens),
                                     source="gateway", adapter=adapter, task=task, latency_ms=latency_ms)
    give(org, interaction, *feedback)
    return interaction


def give(org, interaction, *types):
    """Feedback of these types on the interaction, each event its own."""
    if types:
        feedback_ingest(org=org, events=[FeedbackIn(interaction_id=interaction.pk, type=t, idempotency_key=str(uuid.uuid4()))
                                         for t in types])


# Training runs ------------------------------------------------------------------------------

RATED_PROMPT = (5, 6, 7)  # the prompt of every interaction `rated` serves: they share a baseline


def rated(org, *feedback_per_interaction) -> list[Interaction]:
    """One served interaction for each tuple of feedback types."""
    return [served(org, prompt=RATED_PROMPT, feedback=feedback) for feedback in feedback_per_interaction]


def requested(org) -> TrainingRun:
    return runs.run_request(org=org, trigger=TrainingRun.Trigger.REQUEST, actor="test")


# Adapters -----------------------------------------------------------------------------------


def trained_adapter(root: Path, base="demo-base", name="out") -> Path:
    """A folder under `root` that passes for a PEFT adapter trained on `base` (stand-in weights)."""
    folder = root / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": 8}))
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder


def registered_adapter(org, root: Path) -> AdapterVersion:
    """The organization's next adapter version, a candidate, for the base model the platform serves."""
    source = trained_adapter(root, base=settings.SERVING_BASE_MODEL_NAME, name=f"trained-{org.slug}-{uuid.uuid4().hex[:8]}")
    return registry.adapter_register(org=org, source_dir=source)
