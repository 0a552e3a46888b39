"""The traffic driver: simulated organizations using the platform as tenants' software does.

Each organization's users send demo prompts (SPEC 6.2) to the OpenAI-compatible gateway through
the official openai client, as single requests or as background tasks of 2-4 calls under one
task id (SPEC 6.6). Their persona (demo.personas) judges every response, and what the users do
about it goes to POST /api/v1/feedback, the late events (a reverted edit, a task's outcome) as
late as the persona says, with simulated hours compressed by a time scale. Only the public
contract of SPEC 8 is used; nothing here knows how the platform is built.

    PYTHONPATH=.:platform python -m demo.traffic --url http://127.0.0.1:8000 \\
        --org acme=typed_snake=KEY_OF_ACME --org globex=camel_two_space=KEY_OF_GLOBEX \\
        --requests 200 --concurrency 4 --seed 0 --time-scale 0.001 --task-share 0.1

    from demo.personas import Persona
    from demo.traffic import SimulatedOrg, run_traffic

    acme = SimulatedOrg("acme", Persona.load("typed_snake"), api_key)
    traffic = run_traffic(url="http://127.0.0.1:8000", orgs=[acme], requests=200, concurrency=4,
                          seed=0, time_scale=0.001, task_share=0.1)
    traffic["acme"].edit_persisted_rate, traffic["acme"].by_model  # 0.41, {"acme@v2": 180, ...}

Modules: `driver` (each organization's plan of jobs and the workers that run it), `outbox`
(feedback held until due, then sent in batches with retries), `transports` (the gateway and
REST clients, and the interfaces that tests replace), `stats` (the figures of a run and their
table), `__main__` (the command).
"""

from demo.traffic.driver import SimulatedOrg, run_traffic
from demo.traffic.stats import OrgTraffic, format_summary, wilson_interval
from demo.traffic.transports import Tenant, connect

__all__ = ["OrgTraffic", "SimulatedOrg", "Tenant", "connect", "format_summary", "run_traffic", "wilson_interval"]
