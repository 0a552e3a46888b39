"""Which replicas take a gateway process's traffic, against scripted replicas (real servers on
loopback). With real vLLM servers killed and restarted: tests/deploy/test_cluster.py."""

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from serving.gateway import replicas as replicas_module
from serving.gateway import upstream
from serving.gateway.replicas import Rotation
from tests.serving.scripted_replicas import Answer, ScriptedReplicas

ROUTED = {"acme@v2": Path("/adapters/acme/v2"), "acme@v1": Path("/adapters/acme/v1")}


@dataclass
class Replica:
    """What a vLLM replica serves, and how it answers the calls that change it."""

    serves: dict[str, str] = field(default_factory=lambda: {"base": "/models/base"})
    answering: bool = True
    refusing_loads: bool = False
    loads: list[str] = field(default_factory=list)

    def answer(self, path: str, body) -> Answer:
        if not self.answering:
            return Answer(delay_s=1.0, body={})  # past the look's timeout
        if path == "/v1/models":
            return Answer(body={"data": [{"id": name, "root": root} for name, root in self.serves.items()]})
        if path == "/v1/load_lora_adapter":
            if self.refusing_loads:
                return Answer(status=500, body={"error": {"message": "out of memory"}})
            self.loads.append(body["lora_name"])
            self.serves[body["lora_name"]] = body["lora_path"]
        elif path == "/v1/unload_lora_adapter":
            del self.serves[body["lora_name"]]
        return Answer(body="Success")


@dataclass
class Fleet:
    servers: ScriptedReplicas
    replicas: dict[str, Replica] = field(default_factory=lambda: {"one": Replica(), "two": Replica()})
    routed: dict[str, Path] | None = field(default_factory=lambda: dict(ROUTED))

    def __post_init__(self):
        for name in self.replicas:
            self.servers.scripts[name] = lambda path, body, name=name: self.replicas[name].answer(path, body)

    def url(self, name: str) -> str:
        return self.servers.url(name)

    def rotation(self) -> Rotation:
        async def routed():
            if self.routed is None:
                raise RuntimeError("database unavailable")
            return self.routed

        return Rotation([self.url(name) for name in self.replicas], session=upstream._session, routed=routed)


@pytest.fixture
def fleet(monkeypatch):
    monkeypatch.setattr(replicas_module, "LOOK_TIMEOUT_S", 0.3)
    servers = ScriptedReplicas(["one", "two"])
    yield Fleet(servers)
    servers.close()


def in_rotation(fleet: Fleet, rotation: Rotation) -> list[str]:
    names = {fleet.url(name): name for name in fleet.replicas}
    return [names[replica.url] for replica in rotation.replicas if replica.in_rotation]


def looks(fleet: Fleet, rotation: Rotation, times: int = 1) -> list[str]:
    async def look():
        try:
            for _ in range(times):
                await rotation.look()
        finally:
            await upstream._session().close()
    asyncio.run(look())
    return in_rotation(fleet, rotation)


def test_a_replica_joins_only_once_it_holds_every_routed_adapter(fleet):
    fleet.replicas["two"].refusing_loads = True
    rotation = fleet.rotation()
    assert looks(fleet, rotation) == ["one"]
    assert sorted(fleet.replicas["one"].loads) == ["acme@v1", "acme@v2"]
    fleet.replicas["two"].refusing_loads = False
    assert looks(fleet, rotation) == ["one", "two"]


def test_a_replica_that_restarted_between_two_looks_leaves_until_it_has_its_adapters_again(fleet):
    rotation = fleet.rotation()
    looks(fleet, rotation)
    fleet.replicas["one"] = Replica(refusing_loads=True)  # back, empty, and failing to load for now
    assert looks(fleet, rotation) == ["two"]
    fleet.replicas["one"].refusing_loads = False
    assert looks(fleet, rotation) == ["one", "two"]
    assert fleet.replicas["one"].serves["acme@v2"] == "/adapters/acme/v2"


def test_a_name_serving_other_files_is_loaded_again_from_the_routed_ones(fleet):
    fleet.replicas["one"].serves["acme@v2"] = "/adapters/someone-else/v2"
    looks(fleet, fleet.rotation())
    assert fleet.replicas["one"].serves["acme@v2"] == "/adapters/acme/v2"


def test_a_replica_that_refuses_connections_leaves_at_once_and_one_that_stops_answering_after_two_looks(fleet):
    rotation = fleet.rotation()
    looks(fleet, rotation)
    fleet.servers.stop("one")
    fleet.replicas["two"].answering = False
    assert looks(fleet, rotation) == ["two"]  # one slow answer is forgiven
    assert looks(fleet, rotation) == []
    fleet.servers.start("one")
    fleet.replicas["two"].answering = True
    assert looks(fleet, rotation) == ["one", "two"]


def test_a_replica_too_busy_to_answer_its_looks_stays_while_its_answers_to_requests_arrive(fleet):
    """Serving alone while the other restarts, a replica on a loaded machine can miss its looks'
    timeout: dropping it would leave nobody to serve."""
    rotation = fleet.rotation()
    looks(fleet, rotation)
    fleet.replicas["two"].answering = False
    for _ in range(3):
        rotation.replicas[1].answered = True  # as upstream marks it when a request's answer arrives
        assert looks(fleet, rotation) == ["one", "two"]
    assert looks(fleet, rotation, times=2) == ["one"]  # neither looks nor requests answered: it leaves


def test_without_the_database_nobody_joins_and_nobody_is_dropped_for_it(fleet):
    rotation = fleet.rotation()
    fleet.routed = None
    assert looks(fleet, rotation) == []
    fleet.routed = dict(ROUTED)
    looks(fleet, rotation)
    fleet.routed = None
    assert looks(fleet, rotation) == ["one", "two"]


def test_requests_go_to_the_replica_with_the_fewest_in_flight(fleet):
    rotation = fleet.rotation()

    async def order():
        try:
            first = await rotation.in_order()  # the first call waits for the first look
            first[0].in_flight += 2
            return [replica.url for replica in first], [replica.url for replica in await rotation.in_order()]
        finally:
            await rotation.close()
            await upstream._session().close()

    assert asyncio.run(order()) == ([fleet.url("one"), fleet.url("two")], [fleet.url("two"), fleet.url("one")])


def test_idle_replicas_take_turns(fleet):
    """Under light traffic every replica is idle between requests: each takes its share, so one
    that came back into the rotation gets traffic too."""
    rotation = fleet.rotation()

    async def firsts():
        try:
            return [(await rotation.in_order())[0].url for _ in range(4)]
        finally:
            await rotation.close()
            await upstream._session().close()

    assert asyncio.run(firsts()) == [fleet.url("one"), fleet.url("two")] * 2
