"""A stand-in for vLLM that answers every chat completion with a fixed answer of 64 tokens, with
the logprobs and token ids the gateway asks for: benchmarks/gateway_cpu.py prices the gateway
against it. At once, or after STANDIN_LATENCY_MS (at vLLM-CPU's pace, where the gateway sees
fewer completions a second and smaller recording groups). Not vLLM, and not used by any test.

    python -m uvicorn _standin_model:app --app-dir benchmarks --port 8001
"""

import asyncio
import json
import os
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

COMPLETION_TOKENS = 64
LATENCY_S = float(os.environ.get("STANDIN_LATENCY_MS", "0")) / 1000.0


def _answer(body: dict) -> dict:
    """What vLLM answers a non-streamed chat completion the gateway sends (logprobs, token ids)."""
    words = [f" w{i}" for i in range(COMPLETION_TOKENS)]
    return {
        "id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
        "prompt_token_ids": list(range(40)),
        "choices": [{
            "index": 0, "message": {"role": "assistant", "content": "".join(words)}, "finish_reason": "length",
            "token_ids": list(range(100, 100 + COMPLETION_TOKENS)),
            "logprobs": {"content": [{"token": w, "logprob": -0.25, "bytes": list(w.encode()), "top_logprobs": []} for w in words]},
        }],
        "usage": {"prompt_tokens": 40, "completion_tokens": COMPLETION_TOKENS, "total_tokens": 40 + COMPLETION_TOKENS},
    }


def _chunks(body: dict) -> list[bytes]:
    """The same answer as vLLM streams it: a chunk a token, then the usage."""
    whole = _answer(body)
    choice = whole["choices"][0]
    events = [{"id": whole["id"], "object": "chat.completion.chunk", "model": body["model"], "prompt_token_ids": whole["prompt_token_ids"],
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for token_id, entry in zip(choice["token_ids"], choice["logprobs"]["content"]):
        events.append({"id": whole["id"], "object": "chat.completion.chunk", "model": body["model"], "choices": [{
            "index": 0, "delta": {"content": entry["token"]}, "token_ids": [token_id], "logprobs": {"content": [entry]}}]})
    events.append({"id": whole["id"], "object": "chat.completion.chunk", "model": body["model"], "choices": [], "usage": whole["usage"]})
    return [b"data: " + json.dumps(event).encode() + b"\n\n" for event in events] + [b"data: [DONE]\n\n"]


async def completions(request: Request):
    body = await request.json()
    if LATENCY_S:
        await asyncio.sleep(LATENCY_S)
    if body.get("stream"):
        chunks = _chunks(body)

        async def relay():
            for chunk in chunks:
                yield chunk
        return StreamingResponse(relay(), media_type="text/event-stream")
    return JSONResponse(_answer(body))


async def models(request: Request):
    return JSONResponse({"object": "list", "data": [{"id": "demo-base", "object": "model", "root": "demo-base", "parent": None}]})


app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]), Route("/v1/models", models)])
