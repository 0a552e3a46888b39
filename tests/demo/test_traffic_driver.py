"""The traffic driver (demo.traffic) against the real gateway: simulated organizations' calls
are served and recorded, and their users' feedback, late events included, is stored."""

import pytest

from demo.personas import Persona
from demo.traffic import SimulatedOrg, run_traffic
from tenants.models import BackgroundTask, FeedbackEvent, Interaction
from tests.factories import make_tenant

pytestmark = pytest.mark.vllm


def test_simulated_organizations_get_served_and_their_feedback_arrives(gateway):
    acme, globex = make_tenant("Acme", training_enabled=True), make_tenant("Globex", training_enabled=True)
    orgs = [SimulatedOrg("acme", Persona.load("typed_snake"), acme.key), SimulatedOrg("globex", Persona.load("tab_terse"), globex.key)]
    traffic = run_traffic(url=gateway, orgs=orgs, requests=12, concurrency=3, seed=1, time_scale=1e-5, task_share=0.4)
    for tenant, name in ((acme, "acme"), (globex, "globex")):
        figures = traffic[name]
        assert figures.served == 12 and figures.failures == {}, figures
        assert Interaction.objects.for_org(tenant.org).count() == 12
        stored = FeedbackEvent.objects.for_org(tenant.org)
        assert stored.count() == sum(figures.events.values()) > 0
        assert not stored.exclude(interaction__org=tenant.org).exclude(interaction=None).exists()
        assert BackgroundTask.objects.for_org(tenant.org).count() == figures.tasks > 0
        assert stored.filter(type="task_outcome").count() == len(figures.task_outcomes) == figures.tasks
