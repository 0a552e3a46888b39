"""Serving's part of the tenant API: the organization's adapter versions, and deploying them by hand."""

from dataclasses import asdict

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from serving import canary, deployments, gates, registry
from serving.models import AdapterVersion, Alert
from serving.overrides import setting_types
from tenants.api.views import ERRORS, ListView, pages_ordered_by
from tenants.errors import Conflict
from tenants.models import Role


class AdapterVersionSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The immutable served name, <org>@v<N>.")
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AdapterVersion.Status.choices)
    base_model = serializers.CharField()
    parent = serializers.CharField(source="parent.name", allow_null=True, default=None, help_text="The version it was trained from.")
    created_at = serializers.DateTimeField()
    gate_report = serializers.JSONField(allow_null=True)


class AdapterListView(APIView):
    @extend_schema(responses=AdapterVersionSerializer(many=True))
    def get(self, request):
        adapters = AdapterVersion.objects.for_org(request.auth.org).select_related("parent").order_by("-version")
        return Response(AdapterVersionSerializer(adapters, many=True).data)


class RouteSerializer(serializers.Serializer):
    serving = serializers.SerializerMethodField(help_text='What model="default" is served by: a version, or the base model.')
    canary = serializers.CharField(source="canary.name", allow_null=True, default=None)
    canary_share = serializers.FloatField()

    def get_serving(self, route) -> str:
        return route.serving.name if route.serving else settings.SERVING_BASE_MODEL_NAME


DEPLOY_ERRORS = {
    **ERRORS,
    409: OpenApiResponse(description="The version was blocked by a gate, or is not the one serving (rollback)."),
    503: OpenApiResponse(description="A vLLM replica could not load it; routing is unchanged."),
}


class AdapterPromoteView(APIView):
    roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={200: RouteSerializer, **DEPLOY_ERRORS},
                   description="Serve this version to all of the organization's traffic now: loaded on every replica "
                               "first, then routed in one switch. Blocked versions are refused. Audited.")
    def post(self, request, name):
        adapter = registry.adapter_get(org=request.auth.org, name=name)
        return Response(RouteSerializer(deployments.adapter_deploy(adapter=adapter, actor=request.auth.actor)).data)


class AdapterRollbackView(APIView):
    roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={200: RouteSerializer, **DEPLOY_ERRORS},
                   description="Stop serving this version. The serving version: the organization goes back to what it "
                               "replaced (the base model at first). A version in canary: its users go back to the "
                               "incumbent and it is blocked. Audited.")
    def post(self, request, name):
        org = request.auth.org
        adapter = registry.adapter_get(org=org, name=name)
        route = registry.route_of(org=org)
        if route.canary_id == adapter.pk:
            return Response(RouteSerializer(deployments.canary_stop(adapter=adapter, actor=request.auth.actor, reason="by hand")).data)
        if route.serving_id != adapter.pk:
            raise Conflict(f"{adapter.name} is neither serving this organization nor in canary.")
        return Response(RouteSerializer(deployments.adapter_rollback(org=org, actor=request.auth.actor)).data)


class AlertSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Alert.Kind.choices)
    adapter = serializers.CharField(source="adapter.name")
    message = serializers.CharField()
    figures = serializers.JSONField(help_text="The checks that fired: figures of candidate and incumbent, interval, threshold.")
    created_at = serializers.DateTimeField()


class AlertListView(ListView):
    pagination_class = pages_ordered_by("-created_at")

    @extend_schema(responses=AlertSerializer(many=True), description="Reward-hacking detectors that fired; each blocked its candidate.")
    def get(self, request):
        return self.paginated(Alert.objects.for_org(request.auth.org).select_related("adapter"), AlertSerializer)


def policy_schema(name: str, policy_class: type, *, change: bool):
    """The OpenAPI shape of a policy dataclass (serving.overrides) with each setting's range:
    every setting in a response; in a PUT any of them, null meaning back to the default."""
    def setting(kind: type, low: float, high: float):
        field_class = serializers.IntegerField if kind is int else serializers.FloatField
        return field_class(min_value=low, max_value=high, required=not change, allow_null=change)

    return inline_serializer(name, {key: setting(kind, *policy_class.RANGES[key]) for key, kind in setting_types(policy_class).items()})


GATE_THRESHOLDS = policy_schema("GateThresholds", gates.Thresholds, change=False)
CANARY_POLICY = policy_schema("CanaryPolicy", canary.CanaryPolicy, change=False)


class GateThresholdsView(APIView):
    roles = {"PUT": Role.ADMIN}

    @extend_schema(responses=GATE_THRESHOLDS,
                   description="What each gate check tolerates (defaults unless set).")
    def get(self, request):
        return Response(asdict(gates.thresholds_for(request.auth.org)))

    @extend_schema(request=policy_schema("GateThresholdsChange", gates.Thresholds, change=True),
                   responses={200: GATE_THRESHOLDS, **ERRORS},
                   description="Change the named tolerances (null: back to the default); the others keep their values. Audited.")
    def put(self, request):
        thresholds = gates.thresholds_update(org=request.auth.org, changes=request.data, actor=request.auth.actor)
        return Response(asdict(thresholds))


class CanaryPolicyView(APIView):
    roles = {"PUT": Role.ADMIN}

    @extend_schema(responses=CANARY_POLICY,
                   description="How this organization's canaries run: the candidate's share of end users (sticky per "
                               "`user`), the interactions with a settled outcome each arm needs, and the changes the "
                               "verdict tolerates (defaults unless set).")
    def get(self, request):
        return Response(asdict(canary.canary_policy_for(request.auth.org)))

    @extend_schema(request=policy_schema("CanaryPolicyChange", canary.CanaryPolicy, change=True),
                   responses={200: CANARY_POLICY, **ERRORS},
                   description="Change the named settings (null: back to the default); the others keep their values. A canary running now keeps "
                               "its share; its verdict uses the new minimum and tolerances. Audited.")
    def put(self, request):
        return Response(asdict(canary.canary_policy_update(org=request.auth.org, changes=request.data, actor=request.auth.actor)))
