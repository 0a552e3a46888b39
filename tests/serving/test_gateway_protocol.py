"""What the gateway sends vLLM for a client's request, beside what the client asked."""

import uuid

import pytest

from serving.gateway.protocol import InvalidRequest, request_parse, upstream_body

REQUEST = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}


def test_every_request_carries_its_organizations_own_prefix_cache_salt():
    """Organizations share vLLM's prefix cache: without a salt of its own, the time to an
    answer's first token could tell one organization that another recently sent a prefix."""
    acme, globex = uuid.uuid4(), uuid.uuid4()
    salts = [upstream_body(request_parse(dict(REQUEST)), served_name="demo-base", org_id=org)["cache_salt"]
             for org in (acme, acme, globex)]
    assert salts[0] == salts[1] != salts[2]
    assert len(salts[0]) >= 43 and not set(salts[0]) & set("@/\\\0")  # 256 bits, nothing vLLM refuses


def test_a_client_cannot_choose_the_salt():
    with pytest.raises(InvalidRequest, match="cache_salt"):
        request_parse({**REQUEST, "cache_salt": "guess"})
