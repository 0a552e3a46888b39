"""Which replicas take a gateway process's traffic, against scripted replicas (httpx's mock
transport). With real vLLM servers killed and restarted: tests/deploy/test_cluster.py."""

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from serving.gateway.replicas import Rotation

ROUTED = {"acme@v2": Path("/adapters/acme/v2"), "acme@v1": Path("/adapters/acme/v1")}


@dataclass
class Replica:
    serves: dict[str, str] = field(default_factory=lambda: {"base": "/models/base"})
    answering: bool = True
    refusing_loads: bool = False
    loads: list[str] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if not self.answering:
            raise httpx.ReadTimeout("no answer", request=request)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": name, "root": root} for name, root in self.serves.items()]})
        body = json.loads(request.content)
        if request.url.path == "/v1/load_lora_adapter":
            if self.refusing_loads:
                return httpx.Response(500, json={"error": {"message": "out of memory"}})
            self.loads.append(body["lora_name"])
            self.serves[body["lora_name"]] = body["lora_path"]
        elif request.url.path == "/v1/unload_lora_adapter":
            del self.serves[body["lora_name"]]
        return httpx.Response(200, text="Success")


@dataclass
class Fleet:
    replicas: dict[str, Replica]
    dead: set[str] = field(default_factory=set)
    routed: dict[str, Path] | None = field(default_factory=lambda: dict(ROUTED))

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = f"http://{request.url.host}"
        if url in self.dead:
            raise httpx.ConnectError("connection refused", request=request)
        return self.replicas[url].handle(request)

    def rotation(self) -> Rotation:
        async def routed():
            if self.routed is None:
                raise RuntimeError("database unavailable")
            return self.routed

        return Rotation(list(self.replicas), client=lambda: httpx.AsyncClient(transport=httpx.MockTransport(self.handle)), routed=routed)


@pytest.fixture
def fleet() -> Fleet:
    return Fleet({"http://one": Replica(), "http://two": Replica()})


def in_rotation(rotation: Rotation) -> list[str]:
    return [replica.url for replica in rotation.replicas if replica.in_rotation]


def looks(rotation: Rotation, times: int = 1) -> list[str]:
    async def look():
        for _ in range(times):
            await rotation.look()
    asyncio.run(look())
    return in_rotation(rotation)


def test_a_replica_joins_only_once_it_holds_every_routed_adapter(fleet):
    fleet.replicas["http://two"].refusing_loads = True
    rotation = fleet.rotation()
    assert looks(rotation) == ["http://one"]
    assert sorted(fleet.replicas["http://one"].loads) == ["acme@v1", "acme@v2"]
    fleet.replicas["http://two"].refusing_loads = False
    assert looks(rotation) == ["http://one", "http://two"]


def test_a_replica_that_restarted_between_two_looks_leaves_until_it_has_its_adapters_again(fleet):
    rotation = fleet.rotation()
    looks(rotation)
    fleet.replicas["http://one"] = Replica(refusing_loads=True)  # back, empty, and failing to load for now
    assert looks(rotation) == ["http://two"]
    fleet.replicas["http://one"].refusing_loads = False
    assert looks(rotation) == ["http://one", "http://two"]
    assert fleet.replicas["http://one"].serves["acme@v2"] == "/adapters/acme/v2"


def test_a_name_serving_other_files_is_loaded_again_from_the_routed_ones(fleet):
    fleet.replicas["http://one"].serves["acme@v2"] = "/adapters/someone-else/v2"
    looks(fleet.rotation())
    assert fleet.replicas["http://one"].serves["acme@v2"] == "/adapters/acme/v2"


def test_a_replica_that_refuses_connections_leaves_at_once_and_one_that_stops_answering_after_two_looks(fleet):
    rotation = fleet.rotation()
    looks(rotation)
    fleet.dead.add("http://one")
    fleet.replicas["http://two"].answering = False
    assert looks(rotation) == ["http://two"]  # one slow answer is forgiven
    assert looks(rotation) == []
    fleet.dead.clear()
    fleet.replicas["http://two"].answering = True
    assert looks(rotation) == ["http://one", "http://two"]


def test_without_the_database_nobody_joins_and_nobody_is_dropped_for_it(fleet):
    rotation = fleet.rotation()
    fleet.routed = None
    assert looks(rotation) == []
    fleet.routed = dict(ROUTED)
    looks(rotation)
    fleet.routed = None
    assert looks(rotation) == ["http://one", "http://two"]


def test_requests_go_to_the_replica_with_the_fewest_in_flight(fleet):
    rotation = fleet.rotation()

    async def order():
        first = await rotation.in_order()  # the first call waits for the first look
        first[0].in_flight += 2
        return [replica.url for replica in first], [replica.url for replica in await rotation.in_order()]

    assert asyncio.run(order()) == (["http://one", "http://two"], ["http://two", "http://one"])
