"""Tenant API views: each validates its input, calls one service (or reads one selector) and
serializes the result.

Every view works in `request.auth.org`, the caller's organization; objects are looked up
through services that take that organization, so another organization's id is a 404.
"""

import itertools
import json
from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants import export, feedback, invitations, organizations, privacy, recording, selectors
from tenants.api import serializers as s
from tenants.api.base import ERRORS, ListView, PolicyView, pages_ordered_by, validated
from tenants.api.throttling import OrganizationExportThrottle, OrganizationRateThrottle
from tenants.errors import InvalidInput
from tenants.models import Interaction, Role


# Organization -------------------------------------------------------------------------------

class OrganizationView(APIView):
    roles = {"DELETE": Role.OWNER}

    @extend_schema(responses=s.OrganizationSerializer)
    def get(self, request):
        return Response(s.OrganizationSerializer(request.auth.org).data)

    @extend_schema(request=s.OrganizationDeleteSerializer, responses={204: None, **ERRORS})
    def delete(self, request):
        confirm = validated(s.OrganizationDeleteSerializer, request.data)["confirm"]
        organizations.org_delete(org=request.auth.org, confirm_slug=confirm)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PrivacyPolicyView(PolicyView):
    serializer_class, change_serializer_class = s.PrivacyPolicySerializer, s.PrivacyPolicyChangeSerializer
    read, change = staticmethod(privacy.policy_get), staticmethod(privacy.policy_update)
    put_description = "Change any of the fields; those left out stay as they are. Every change is audited."


class AuditLogView(ListView):
    pagination_class = pages_ordered_by("-at")
    serializer_class = s.AuditEventSerializer
    selector = staticmethod(selectors.audit_events_list)


class MemberListView(APIView):
    roles = {"POST": Role.ADMIN}

    @extend_schema(responses=s.MemberSerializer(many=True))
    def get(self, request):
        members = selectors.members_list(org=request.auth.org)
        return Response(s.MemberSerializer(members, many=True).data)

    @extend_schema(request=s.MemberCreateSerializer, responses={201: s.MemberInvitedSerializer, **ERRORS},
                   description="Add a member; `invitation_url`, shown once, lets them set a password and enter the console.")
    def post(self, request):
        data = validated(s.MemberCreateSerializer, request.data)
        member = organizations.member_add(org=request.auth.org, email=data["email"], role=data["role"], by=request.auth)
        _, token = invitations.invitation_create(membership=member, actor=request.auth.actor)
        member.invitation_url = invitation_url(request, token)
        return Response(s.MemberInvitedSerializer(member).data, status=status.HTTP_201_CREATED)


class MemberView(APIView):
    find = staticmethod(organizations.membership_get)
    roles = {"PATCH": Role.ADMIN, "DELETE": Role.ADMIN}

    @extend_schema(responses={200: s.MemberSerializer, **ERRORS})
    def get(self, request, member_id):
        return Response(s.MemberSerializer(organizations.membership_get(org=request.auth.org, member_id=member_id)).data)

    @extend_schema(request=s.MemberRoleSerializer, responses={200: s.MemberSerializer, **ERRORS})
    def patch(self, request, member_id):
        member = organizations.membership_get(org=request.auth.org, member_id=member_id)
        role = validated(s.MemberRoleSerializer, request.data)["role"]
        return Response(s.MemberSerializer(organizations.member_set_role(membership=member, role=role, by=request.auth)).data)

    @extend_schema(responses={204: None, **ERRORS})
    def delete(self, request, member_id):
        member = organizations.membership_get(org=request.auth.org, member_id=member_id)
        organizations.member_remove(membership=member, by=request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberInvitationView(APIView):
    find = staticmethod(organizations.membership_get)
    roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={201: s.MemberInvitedSerializer, **ERRORS},
                   description="A new invitation link for the member (any unused one stops working): how a member who "
                               "forgot their password sets a new one. Shown once.")
    def post(self, request, member_id):
        member = organizations.membership_get(org=request.auth.org, member_id=member_id)
        member.invitation_url = invitation_url(request, invitations.member_reinvite(membership=member, by=request.auth))
        return Response(s.MemberInvitedSerializer(member).data, status=status.HTTP_201_CREATED)


def invitation_url(request, token: str) -> str:
    return request.build_absolute_uri(reverse("console:invitation", kwargs={"token": token}))


class ApiKeyListView(APIView):
    roles = {"POST": Role.ADMIN}

    @extend_schema(responses=s.ApiKeySerializer(many=True))
    def get(self, request):
        return Response(s.ApiKeySerializer(selectors.api_keys_list(org=request.auth.org), many=True).data)

    @extend_schema(request=s.ApiKeyCreateSerializer, responses={201: s.ApiKeyCreatedSerializer, **ERRORS})
    def post(self, request):
        data = validated(s.ApiKeyCreateSerializer, request.data)
        api_key, raw_key = organizations.api_key_issue(org=request.auth.org, name=data["name"], role=data["role"], by=request.auth)
        api_key.key = raw_key
        return Response(s.ApiKeyCreatedSerializer(api_key).data, status=status.HTTP_201_CREATED)


class ApiKeyView(APIView):
    find = staticmethod(organizations.api_key_get)
    roles = {"DELETE": Role.ADMIN}

    @extend_schema(responses={200: s.ApiKeySerializer, **ERRORS})
    def get(self, request, key_id):
        return Response(s.ApiKeySerializer(organizations.api_key_get(org=request.auth.org, key_id=key_id)).data)

    @extend_schema(responses={200: s.ApiKeySerializer, **ERRORS}, description="Revoke the key; it stops working at once.")
    def delete(self, request, key_id):
        api_key = organizations.api_key_get(org=request.auth.org, key_id=key_id)
        return Response(s.ApiKeySerializer(organizations.api_key_revoke(api_key=api_key, by=request.auth)).data)


# Recording ----------------------------------------------------------------------------------

class InteractionPage(pages_ordered_by("-created_at")):
    """At most `max_bytes` of content a page, so that `?limit=1000` of large interactions is not
    gigabytes in memory: a page ends early (never empty) and its `next` goes on from there."""

    max_bytes = 8 * 1024 * 1024

    def paginate_queryset(self, queryset, request, view=None):
        rows = super().paginate_queryset(queryset, request, view)
        reverse = self.cursor is not None and self.cursor.reverse  # a `previous` page: its cursor's side is the end
        kept, size = [], 0
        for row in reversed(rows) if reverse else rows:
            size += row.content_size or 0
            if kept and size > self.max_bytes:
                break
            kept.append(row)
        if len(kept) < len(rows):  # the first row left out is where the cursor on that side goes on
            if reverse:
                kept.reverse()
                self.has_previous = True
                self.previous_position = self._get_position_from_instance(rows[len(rows) - len(kept) - 1], self.ordering)
            else:
                self.has_next = True
                self.next_position = self._get_position_from_instance(rows[len(kept)], self.ordering)
            self.page = kept
        contents = selectors.interaction_contents(org=request.auth.org, ids=[row.pk for row in kept])
        for row in kept:
            row.content = contents.get(row.pk)  # None if erased or purged since
        return kept


class InteractionListView(ListView):
    pagination_class = InteractionPage
    serializer_class = s.InteractionSerializer
    selector = staticmethod(selectors.interactions_list)
    filters = s.InteractionFilterSerializer

    @extend_schema(request=s.InteractionCreateSerializer, responses={201: s.CreatedSerializer, **ERRORS},
                   description="Record an interaction served outside the gateway.")
    def post(self, request):
        data = validated(s.InteractionCreateSerializer, request.data)
        org = request.auth.org
        task = recording.task_get(org=org, task_id=data["task_id"]) if data.get("task_id") else None
        interaction = recording.interaction_record(
            org=org,
            content=recording.InteractionContent(messages=[dict(m) for m in data["messages"]], completion=data["completion"]),
            source=Interaction.Source.API,
            adapter=data.get("adapter"),
            task=task,
            latency_ms=data.get("latency_ms"),
        )
        return Response({"id": str(interaction.pk)}, status=status.HTTP_201_CREATED)


class InteractionView(APIView):
    find = staticmethod(recording.interaction_get)
    roles = {"DELETE": Role.ADMIN}

    @extend_schema(responses={200: s.InteractionSerializer, **ERRORS})
    def get(self, request, interaction_id):
        return Response(s.InteractionSerializer(recording.interaction_get(org=request.auth.org, interaction_id=interaction_id)).data)

    @extend_schema(responses={204: None, **ERRORS}, description="Erase the interaction, its content and its feedback. The adapter versions "
                                                           "trained on it are tainted; the privacy policy's tainted_adapters "
                                                           "says what follows (docs/security.md, \"Erasure\").")
    def delete(self, request, interaction_id):
        interaction = recording.interaction_get(org=request.auth.org, interaction_id=interaction_id)
        recording.interaction_erase(interaction=interaction, actor=request.auth.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class FeedbackView(ListView):
    pagination_class = pages_ordered_by("-received_at")
    serializer_class = s.FeedbackEventSerializer
    selector = staticmethod(selectors.feedback_list)
    filters = s.FeedbackFilterSerializer

    @extend_schema(
        request=s.FeedbackBatchSerializer,
        responses={200: s.FeedbackBatchResultSerializer, **ERRORS,
                   409: OpenApiResponse(description="An idempotency key was reused for a different event.")},
        description=(
            "Report feedback events in a batch. The batch is atomic: if any event is invalid, names an "
            "interaction this organization does not have, or reuses an idempotency key for a different "
            "event, nothing is stored and `error.details` lists each offending event by index. "
            "Replays (same idempotency key, same event) are stored once and reported as duplicates."
        ),
    )
    def post(self, request):
        if not isinstance(request.data, dict) or set(request.data) != {"events"}:
            raise InvalidInput('The body must be {"events": [...]}.')
        events = feedback.feedback_parse(request.data["events"], max_batch=settings.FEEDBACK_MAX_BATCH)
        results = feedback.feedback_ingest(org=request.auth.org, events=events)
        created = sum(result.status == "created" for result in results)
        return Response({
            "created": created,
            "duplicates": len(results) - created,
            "results": [{"index": r.index, "status": r.status, "id": str(r.id)} for r in results],
        })


class TaskListView(ListView):
    pagination_class = pages_ordered_by("-created_at")
    serializer_class = s.TaskSerializer
    selector = staticmethod(selectors.tasks_list)

    @extend_schema(request=s.TaskCreateSerializer, responses={201: s.CreatedSerializer, **ERRORS},
                   description="Open a background task; pass its id with each gateway call and report its outcome later.")
    def post(self, request):
        validated(s.TaskCreateSerializer, request.data)
        return Response({"id": str(recording.task_create(org=request.auth.org).pk)}, status=status.HTTP_201_CREATED)


class TaskView(APIView):
    @extend_schema(responses={200: s.TaskSerializer, **ERRORS})
    def get(self, request, task_id):
        return Response(s.TaskSerializer(recording.task_get(org=request.auth.org, task_id=task_id)).data)


class TaskOutcomeView(APIView):
    @extend_schema(request=s.TaskOutcomeSerializer,
                   responses={201: s.FeedbackEventSerializer, 200: s.FeedbackEventSerializer, **ERRORS,
                              409: OpenApiResponse(description="The task already has a different outcome.")},
                   description="Report a background task's outcome (0 to 1) once; a replay with the same key answers 200.")
    def post(self, request, task_id):
        task = recording.task_get(org=request.auth.org, task_id=task_id)
        data = validated(s.TaskOutcomeSerializer, request.data)
        event, created = recording.task_outcome_record(task=task, value=data["value"], idempotency_key=data["idempotency_key"])
        return Response(s.FeedbackEventSerializer(event).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


# Export -------------------------------------------------------------------------------------

EXPORT_SERIALIZERS = {
    "organization": s.OrganizationSerializer,
    "privacy_policy": s.PrivacyPolicySerializer,
    "member": s.MemberSerializer,
    "api_key": s.ApiKeySerializer,
    "audit_event": s.AuditEventSerializer,
    "task": s.TaskSerializer,
    "interaction": s.InteractionSerializer,
    "feedback": s.FeedbackEventSerializer,
}


class ExportView(APIView):
    roles = {"GET": Role.ADMIN}
    throttle_classes = [OrganizationRateThrottle, OrganizationExportThrottle]

    @extend_schema(responses={(200, "application/x-ndjson"): OpenApiResponse(
        response=OpenApiTypes.STR,
        description="One JSON object per line, each with a `kind`: organization, privacy_policy, member, "
                    "api_key, audit_event, task, interaction (with its decrypted content), feedback.")})
    def get(self, request):
        rows = export.org_export(org=request.auth.org, actor=request.auth.actor)
        lines = (json.dumps({"kind": kind, **EXPORT_SERIALIZERS[kind](row).data}, default=str) + "\n" for kind, row in rows)
        return StreamingHttpResponse(streamed(request, lines), content_type="application/x-ndjson",
                                     headers={"Content-Disposition": f'attachment; filename="{request.auth.org.slug}-export.ndjson"'})


EXPORT_BATCH = 100  # lines read (and decrypted) per hop to the database thread


def streamed(request, lines: Iterator[str]) -> Iterator[str] | AsyncIterator[str]:
    """What to stream: under ASGI, Django reads a synchronous iterator whole into memory before
    sending a byte, so the server gets an asynchronous one that reads a batch at a time, on the
    request's database thread."""
    if not isinstance(request._request, ASGIRequest):
        return lines
    read_batch = sync_to_async(lambda: "".join(itertools.islice(lines, EXPORT_BATCH)), thread_sensitive=True)

    async def batches() -> AsyncIterator[str]:
        while batch := await read_batch():
            yield batch

    return batches()
