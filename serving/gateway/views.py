"""POST /v1/chat/completions: the tenant-facing, OpenAI-compatible endpoint.

Async end to end, so a slow stream holds a coroutine, not a thread. Database work runs on the
gateway's database threads, and only when the per-process caches do not know the answer: the
API key, the organization's limits, whether it is over its storage quota and its route are
remembered for up to a second, so a request from an organization seen within it reaches a
database thread once, to be recorded. An admitted request then waits for its organization's
turn at the model servers (turns.py) before it goes upstream. Every completion that reaches
the client is recorded first (or, streamed, before the final `[DONE]`), in a group with the
completions that finish with it (recorder.py); a stream its client drops is recorded with what
was generated, marked interrupted; a request that fails upstream records nothing.
"""

import asyncio
import functools
import json
import logging
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass

from django.conf import settings
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from serving.gateway import upstream
from serving.gateway.database import in_db_thread, in_key_reads_thread
from serving.gateway.limits import Admission, Limiter, RateLimited, SharedLimiter, retry_after_header
from serving.gateway.protocol import (
    GatewayError, InvalidRequest, ModelNotFound, RequestTooLarge, StorageQuotaExceeded, TaskNotFound,
    TooManyRequests, Unauthenticated, UpstreamUnavailable, client_view, request_parse, upstream_body,
)
from serving.gateway.recorder import GroupRecorder
from serving.gateway.sample import Sample
from serving.gateway.server_timing import ServerTiming
from serving.gateway.turns import FairTurns, TurnTimeout
from serving.policies import Limits
from serving.routing import Target, target_known, target_resolve
from serving.traffic import traffic_limits_for
from serving.ttl_cache import TtlCache
from tenants.errors import NotFound, QuotaExceeded
from tenants.key_hashes import KeyHashes
from tenants.models import BackgroundTask, Interaction, Organization
from tenants.organizations import Principal, api_key_authenticate, bearer_key
from tenants.recording import InteractionContent, Recording
from tenants.storage import storage_quota_check

log = logging.getLogger(__name__)

_limits: TtlCache[Limits] = TtlCache(ttl_s=1.0)  # a change of limits applies within a second
_principals: TtlCache[Principal | None] = TtlCache(ttl_s=1.0)
_over_quota: TtlCache[str] = TtlCache(ttl_s=1.0)  # why the organization is over its storage quota, or ""


@functools.cache
def limiter() -> Limiter | SharedLimiter:
    """Shared by every gateway process through Redis when one is configured, else this process's own."""
    url = settings.LIMITS_REDIS_URL
    return SharedLimiter(url) if url else Limiter()


@functools.cache
def recorder() -> GroupRecorder:
    return GroupRecorder()


@functools.cache
def turns() -> FairTurns:
    return FairTurns(settings.GATEWAY_UPSTREAM_SLOTS)


@dataclass(frozen=True)
class Call:
    """One admitted request: who asked, what serves it, what it belongs to."""

    org: Organization
    request: dict
    target: Target
    task: BackgroundTask | None
    interaction_id: str
    started: float
    size: int  # of the request's body, in bytes

    def charge(self, sample: Sample, *, model_worked: bool) -> int:
        """The tokens the limiter charges: what vLLM counted; or where a model server worked on
        the request and failed before saying (a timeout after minutes of generation, a prompt
        too long for the model), what a prompt of this size costs, about four bytes a token:
        else such failures would be free, again and again. A request no model server took (none
        ready, one failing) costs nothing."""
        return sample.token_count() or (self.size // 4 if model_worked else 0)


async def chat_completions(request: Request) -> Response:
    started = time.perf_counter()
    timing = ServerTiming(started)
    if request.method != "POST":
        return InvalidRequest("Use POST.").response()
    # The key first, then the organization's limits, then the body: a request that will be
    # refused costs neither the body's bytes nor the database (known keys and limits are cached).
    try:
        org = await _authenticated(request.headers)
        limits = _limits.peek(org.pk) or await in_db_thread(_limits_of, org)
        admission = await limiter().admit(org.pk, limits)
        timing.mark("admit")
    except RateLimited as limited:
        return TooManyRequests(limited.message, retry_after=retry_after_header(limited.retry_after_s)).response()
    except GatewayError as error:
        return error.response()
    try:
        call = await _admitted(org, request.headers, await _body_of(request), started)
        timing.mark("parse")
        admission.attach(await turns().take(org.pk, timeout_s=settings.SERVING_UPSTREAM_TIMEOUT_S))
        timing.mark("turn")
    except BaseException as error:  # a client gone (CancelledError) too
        admission.release()
        if isinstance(error, TurnTimeout):
            return UpstreamUnavailable(f"The model servers are busy: {error}").response()
        if isinstance(error, GatewayError):
            return error.response()
        if isinstance(error, ClientDisconnect):  # gone mid-body, or cut off at the size limit: nobody reads this
            return InvalidRequest("The client went away before its request was read.").response()
        raise
    if call.request["stream"]:
        return await _streamed(call, admission, timing)
    sample, model_worked = Sample(), False
    try:
        async with upstream.completion(upstream_body(call.request, served_name=call.target.name, org_id=call.org.pk), call.target) as completion:
            model_worked = True
            payload = await completion.payload()
        timing.mark("model")
        sample = Sample.of_response(payload)
        await recorder().record(_recording(call, sample))
        timing.mark("record")
        return JSONResponse(client_view(payload, request=call.request, interaction_id=call.interaction_id, served_name=call.target.name),
                            headers=timing.header())
    except GatewayError as error:
        model_worked = model_worked or error.model_worked
        return error.response()
    finally:
        admission.release(tokens=call.charge(sample, model_worked=model_worked))


async def _streamed(call: Call, admission: Admission, timing: ServerTiming) -> Response:
    """Open the upstream stream before answering, so that a failure is still a clean error
    status; then relay chunks as they come (the headers time what came before the first)."""
    stack = AsyncExitStack()
    try:
        completion = await stack.enter_async_context(
            upstream.completion(upstream_body(call.request, served_name=call.target.name, org_id=call.org.pk), call.target)
        )
    except BaseException as error:  # a client gone (CancelledError) too
        admission.release(tokens=call.charge(Sample(), model_worked=getattr(error, "model_worked", False)))
        if isinstance(error, GatewayError):
            return error.response()
        raise
    timing.mark("model")
    relay = _relay(call, stack, completion, admission)
    # a stream dropped unread: the model server had begun it
    weakref.finalize(relay, _abandon, admission, stack, asyncio.get_running_loop(), call.charge(Sample(), model_worked=True))
    return StreamingResponse(relay, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **timing.header()})


_closing: set[asyncio.Task] = set()  # work left to finish after a client went; the loop holds its tasks weakly


def _abandon(admission: Admission, stack: AsyncExitStack, loop: asyncio.AbstractEventLoop, tokens: int) -> None:
    """A stream dropped before its first chunk is never iterated: give its slot back and
    close its upstream response, so that vLLM stops generating (no-ops after a full relay).
    The finalizer runs on whichever thread drops the stream (the garbage collector's, say),
    and the limiter belongs to the event loop: the work is handed to the loop."""
    try:
        loop.call_soon_threadsafe(_give_back, admission, stack, tokens)
    except RuntimeError:  # the loop is closed: nothing can touch the limiter from it any more
        admission.release(tokens=tokens)


def _give_back(admission: Admission, stack: AsyncExitStack, tokens: int) -> None:
    admission.release(tokens=tokens)
    _in_background(stack.aclose())


def _in_background(work) -> None:
    task = asyncio.get_running_loop().create_task(work)
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _body_of(request: Request) -> bytes:
    """The body, refused past the tenant API's size limit before it is all in memory."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


async def _relay(call: Call, stack: AsyncExitStack, completion: upstream.Completion, admission: Admission):
    sample, recording = Sample(), False
    try:
        async with stack:
            async for line in completion.lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: "):])
                if "error" in chunk:  # vLLM failed mid-generation: a cut-off completion is not served, nor recorded
                    message = (chunk["error"] or {}).get("message", "unknown error")
                    yield _event(UpstreamUnavailable(f"The model server failed mid-stream: {message}").body())
                    return
                sample.add_chunk(chunk)
                visible = client_view(chunk, request=call.request, interaction_id=call.interaction_id, served_name=call.target.name)
                if visible["choices"] or "usage" in visible:
                    yield _event(visible)
        recording = True  # from here the whole completion is recorded, even if the client goes now
        await recorder().record(_recording(call, sample))
        yield b"data: [DONE]\n\n"
    except (asyncio.CancelledError, GeneratorExit):  # the client went away mid-stream
        # Recorded with what was generated, so that its feedback has somewhere to land; on a task
        # of its own, since this one is being cancelled and can await nothing more.
        if not recording:
            _in_background(recorder().record(_recording(call, sample, interrupted=True)))
        raise
    except GatewayError as error:  # the stream broken off
        yield _event(error.body())
    except Exception:
        log.exception("streamed completion %s failed", call.interaction_id)
        yield _event({"error": {"message": "The completion could not be recorded.", "type": "server_error", "param": None, "code": None}})
    finally:
        admission.release(tokens=call.charge(sample, model_worked=True))


def _event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


# Database work, on the gateway's database threads ------------------------------------------------------

# Bodies up to this size are parsed on the event loop; a larger one on a thread of its own, one
# at a time: large bodies queue behind each other, not in front of the database threads'
# recordings. (The parser holds the interpreter while it reads, so the loop still pauses for it;
# what bounds that is the tokens a failed one is charged, Call.charge.)
PARSE_ON_LOOP_BYTES = 64 * 1024
_large_bodies = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-parse")


async def _admitted(org: Organization, headers: Headers, body: bytes, started: float) -> Call:
    """The request, what serves it and what it belongs to. Without leaving the event loop when
    this process read the organization's quota and route within the last second and the request
    names no task (most requests: a hop to a database thread and back costs more than the rest
    of admission), else on a database thread."""
    parsed = (_parsed(body) if len(body) <= PARSE_ON_LOOP_BYTES
              else await asyncio.get_running_loop().run_in_executor(_large_bodies, _parsed, body))
    in_body = (parsed.get("metadata") or {}).get("task_id")
    task_id, task_param = (in_body, "metadata") if in_body else (headers.get("X-Task-Id"), None)  # a header is no body parameter
    over_quota, target, task = _over_quota.peek(org.pk), target_known(org=org, model=parsed["model"], end_user=parsed.get("user")), None
    if over_quota is None or target is None or task_id:
        target, task = await in_db_thread(_looked_up, org, parsed, task_id, task_param)
    elif over_quota:
        raise StorageQuotaExceeded(over_quota)
    return Call(org=org, request=parsed, target=target, task=task, interaction_id=str(uuid.uuid4()), started=started,
                size=len(body))


def _parsed(body: bytes) -> dict:
    try:
        return request_parse(json.loads(body))
    except ValueError as error:  # not JSON, or not UTF-8
        raise InvalidRequest(f"The request body is not valid JSON: {error}.") from None
    except RecursionError:
        raise InvalidRequest("The request body is nested too deeply.") from None


def _looked_up(org: Organization, parsed: dict, task_id: str | None, task_param: str | None) -> tuple[Target, BackgroundTask | None]:
    if over_quota := _over_quota.get(org.pk, lambda: _quota_read(org)):  # before the model's time is spent
        raise StorageQuotaExceeded(over_quota)
    try:
        target = target_resolve(org=org, model=parsed["model"], end_user=parsed.get("user"))
    except NotFound as error:
        raise ModelNotFound(error.message, param="model") from None
    return target, _task_of(org, task_id, param=task_param)


async def _authenticated(headers: Headers) -> Organization:
    """The caller's organization: from the cache on the event loop when the key was seen within
    a second, else from the database on its thread."""
    raw_key, principal = bearer_key(headers.get("Authorization", "")), None
    if raw_key is not None:
        principal = _principals.peek(raw_key) or await _looked_up_key(raw_key)
    if principal is None:
        raise Unauthenticated("Missing, unknown or revoked API key: send 'Authorization: Bearer <api_key>'.")
    return principal.org


@functools.cache
def key_hashes() -> KeyHashes:
    return KeyHashes(on_thread=in_key_reads_thread)


async def _looked_up_key(raw_key: str) -> Principal | None:
    """A key of the hashes there are, from the database; any other is no key (tenants/key_hashes.py)."""
    return await key_hashes().principal_of(raw_key, lambda key: in_db_thread(_principal_of, key))


def _principal_of(raw_key: str) -> Principal | None:
    """Known keys are remembered for a second (a revoked key stops working within it)."""
    return _principals.get(raw_key, lambda: api_key_authenticate(raw_key))


def _task_of(org: Organization, task_id: str | None, *, param: str | None) -> BackgroundTask | None:
    if not task_id:
        return None
    try:
        task_id = uuid.UUID(task_id)
    except ValueError:
        raise InvalidRequest(f"task_id {task_id!r} is not a task id.", param=param) from None
    task = BackgroundTask.objects.for_org(org).filter(pk=task_id).first()
    if task is None:
        raise TaskNotFound(f"No task {task_id} in this organization.", param=param)
    return task


def _quota_read(org: Organization) -> str:
    try:
        storage_quota_check(org=org)
    except QuotaExceeded as error:
        return error.message
    return ""


def _limits_of(org: Organization) -> Limits:
    return _limits.get(org.pk, lambda: traffic_limits_for(org=org))


def _recording(call: Call, sample: Sample, *, interrupted: bool = False) -> Recording:
    return Recording(
        org=call.org,
        content=InteractionContent(messages=call.request["messages"], completion=sample.text, tokens=sample.tokens()),
        source=Interaction.Source.GATEWAY,
        interaction_id=uuid.UUID(call.interaction_id),
        adapter=None if call.target.is_base else call.target.name,
        task=call.task,
        end_user=call.request.get("user"),
        latency_ms=(time.perf_counter() - call.started) * 1000.0,
        prompt_tokens=sample.prompt_count(),
        completion_tokens=sample.completion_tokens if not interrupted else len(sample.completion_ids or []),
        interrupted=interrupted,
    )
