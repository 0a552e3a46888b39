"""Serving's part of the tenant API: the organization's adapter versions, deploying them by
hand, how each model does on live traffic, alerts, and the gate and canary policies."""

from datetime import timedelta

from django.conf import settings
from django.http import FileResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from serving import alerts, canary, deployments, exports, gates, live, registry, selectors, traffic, uploads
from serving.models import AdapterVersion, Alert
from serving.policies import CanaryPolicy, Limits, Thresholds
from tenants.api.base import ERRORS, ListView, PolicyView, pages_ordered_by, validated
from tenants.api.serializers import StrictSerializer, policy_serializer
from tenants.errors import InvalidInput
from tenants.models import Role


class TaintSerializer(serializers.Serializer):
    at = serializers.DateTimeField(source="tainted_at")
    erased = serializers.IntegerField(source="taint.erased", default=0, help_text="Interactions it trained on, erased since.")
    purged = serializers.IntegerField(source="taint.purged", default=0, help_text="... purged by retention since.")
    zero_retention = serializers.IntegerField(source="taint.zero_retention", default=0,
                                              help_text="... whose content zero retention dropped.")
    via = serializers.CharField(source="taint.via", allow_null=True, default=None,
                                help_text="The tainted ancestor it descends from, when the taint is inherited.")
    weights_deleted_at = serializers.DateTimeField(allow_null=True, help_text="Retired under the retrain policy: its weights are gone.")

    def to_representation(self, adapter):
        return None if adapter.tainted_at is None else super().to_representation(adapter)


class AdapterVersionSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The immutable served name, <org>@v<N>.")
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AdapterVersion.Status.choices)
    base_model = serializers.CharField()
    parent = serializers.CharField(source="parent.name", allow_null=True, default=None, help_text="The version it was trained from.")
    origin = serializers.ChoiceField(choices=AdapterVersion.Origin.choices, help_text="Trained here, or uploaded.")
    created_at = serializers.DateTimeField()
    tainted = TaintSerializer(source="*", allow_null=True, help_text="Null unless erasure reached its training data.")
    gate_report = serializers.JSONField(allow_null=True, help_text="As a cycle's: each check's figures, interval and verdict, "
                                                                   "the suite's sampling, the cumulative detectors' lineage.")


class AdapterUploadSerializer(serializers.Serializer):
    archive = serializers.FileField(help_text="A tar.gz of a PEFT LoRA directory: adapter_config.json and "
                                              "adapter_model.safetensors, at the top or in one folder, and optionally the "
                                              "manifest.json of a download.")


class AdapterUploadedSerializer(serializers.Serializer):
    adapter = AdapterVersionSerializer()
    cycle = serializers.UUIDField(allow_null=True, help_text="The cycle that gates it and, if it passes, canaries it.")


class AdapterListView(APIView):
    roles = {"POST": Role.ADMIN}
    parser_classes = [MultiPartParser]
    # An upload has a limit of its own (PLATFORM_ADAPTER_UPLOAD_MAX_BYTES): held to the API's
    # bytes a minute too, no archive past 16 MiB could ever be uploaded.
    body_bytes_counted = False

    @extend_schema(responses=AdapterVersionSerializer(many=True))
    def get(self, request):
        return Response(AdapterVersionSerializer(selectors.adapters_list(org=request.auth.org), many=True).data)

    @extend_schema(request={"multipart/form-data": AdapterUploadSerializer},
                   responses={201: AdapterUploadedSerializer, **ERRORS,
                              409: OpenApiResponse(description="Another cycle is active; upload again once it ends."),
                              413: OpenApiResponse(description="The archive is larger than the deployment allows.")},
                   description="Register an adapter trained elsewhere as a candidate of this organization. The archive is "
                               "checked first (base model, rank, target modules and tensor shapes, file sizes, no paths "
                               "outside it, no links, no pickles); a refusal is a 400 whose code names the problem. A "
                               "candidate reaches users only through the gates and a canary, in a cycle started here. Audited.")
    def post(self, request):
        archive = request.FILES.get("archive")
        if archive is None:
            raise InvalidInput("Send the archive as the multipart form field `archive`.")
        adapter, cycle = uploads.adapter_upload(org=request.auth.org, archive=archive, actor=request.auth.actor)
        return Response(AdapterUploadedSerializer({"adapter": adapter, "cycle": cycle}).data, status=status.HTTP_201_CREATED)


class AdapterDownloadView(APIView):
    find = staticmethod(registry.adapter_get)
    roles = {"GET": Role.ADMIN}

    @extend_schema(responses={(200, "application/gzip"): OpenApiTypes.BINARY, **ERRORS,
                              409: OpenApiResponse(description="Its weights were deleted (erasure).")},
                   description="The version as a PEFT directory in a tar.gz, with manifest.json (base model and its "
                               "fingerprint, parent, dataset lineage hash, reward spec version, gate report, taint): "
                               "peft.PeftModel.from_pretrained and vLLM's --lora-modules load the folder as it is.")
    def get(self, request, name):
        adapter = registry.adapter_get(org=request.auth.org, name=name)
        return FileResponse(exports.adapter_archive(adapter), as_attachment=True, content_type="application/gzip",
                            filename=f"{exports.archive_name(adapter)}.tar.gz")


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
    find = staticmethod(registry.adapter_get)
    roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={200: RouteSerializer, **DEPLOY_ERRORS},
                   description="Serve this version to all of the organization's traffic now: loaded on every replica "
                               "first, then routed in one switch. Blocked versions are refused. Audited.")
    def post(self, request, name):
        adapter = registry.adapter_get(org=request.auth.org, name=name)
        return Response(RouteSerializer(deployments.adapter_deploy(adapter=adapter, actor=request.auth.actor)).data)


class AdapterRollbackView(APIView):
    find = staticmethod(registry.adapter_get)
    roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={200: RouteSerializer, **DEPLOY_ERRORS},
                   description="Stop serving this version. The serving version: the organization goes back to what it "
                               "replaced (the base model at first). A version in canary: its users go back to the "
                               "incumbent and it is blocked. Audited.")
    def post(self, request, name):
        adapter = registry.adapter_get(org=request.auth.org, name=name)
        return Response(RouteSerializer(deployments.adapter_withdraw(adapter=adapter, actor=request.auth.actor)).data)


class AlertSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Alert.Kind.choices)
    adapter = serializers.CharField(source="adapter.name")
    message = serializers.CharField()
    figures = serializers.JSONField(help_text="The checks that fired: figures of candidate and incumbent, interval, threshold.")
    created_at = serializers.DateTimeField()
    acknowledged_at = serializers.DateTimeField(allow_null=True, help_text="Null while the alert is open.")
    acknowledged_by = serializers.CharField(allow_blank=True)


class LiveFiguresQuerySerializer(StrictSerializer):
    days = serializers.IntegerField(min_value=1, max_value=90, default=7, help_text="How far back to count (default 7).")


class LiveModelSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The served name: a version's, or the base model's.")
    adapter = serializers.CharField(allow_null=True, help_text="Null for the base model.")
    served = serializers.IntegerField(help_text="Completions the gateway served with it.")
    settled = serializers.IntegerField(help_text="Of those, the ones whose outcome is known: what the rates of outcomes are of.")
    edit_persisted = serializers.IntegerField()
    dissatisfied = serializers.IntegerField(help_text="Dissatisfied follow-ups.")
    tool_call_invalid = serializers.IntegerField(help_text="Invalid tool calls, as the callers reported them.")
    edit_persisted_rate = serializers.FloatField(allow_null=True)
    dissatisfied_rate = serializers.FloatField(allow_null=True)
    tool_call_invalid_rate = serializers.FloatField(allow_null=True, help_text="Of every completion served: a caller reports an invalid "
                                                    "call at once, so none is pending.")
    latency_mean_ms = serializers.FloatField(allow_null=True)


class LiveFiguresSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    models = LiveModelSerializer(many=True, help_text="The base model first, then each version by number.")


class LiveFiguresView(APIView):
    @extend_schema(parameters=[LiveFiguresQuerySerializer], responses={200: LiveFiguresSerializer, **ERRORS},
                   description="How each model that served the organization's users through the gateway did on them: "
                               "completions served, and rates per completion whose outcome is known (an accepted edit's "
                               "comes when it persisted or was reverted). The gates measure a candidate on their suite; "
                               "this is what holds on live traffic, for as long as a version serves.")
    def get(self, request):
        days = validated(LiveFiguresQuerySerializer, dict(request.query_params.items()))["days"]
        since = timezone.now() - timedelta(days=days)
        figures = live.live_figures(org=request.auth.org, since=since)
        return Response(LiveFiguresSerializer({"since": since, "models": figures}).data)


@extend_schema_view(get=extend_schema(description="Reward-hacking detectors that fired; each blocked its candidate."))
class AlertListView(ListView):
    pagination_class = pages_ordered_by("-created_at")
    serializer_class = AlertSerializer
    selector = staticmethod(selectors.alerts_list)


class AlertAcknowledgeView(APIView):
    find = staticmethod(alerts.alert_get)
    roles = {"POST": Role.ADMIN}

    @extend_schema(request=None, responses={200: AlertSerializer, **ERRORS},
                   description="Mark the alert seen: it stops counting as open. Acknowledging it again changes nothing. Audited.")
    def post(self, request, alert_id):
        alert = alerts.alert_get(org=request.auth.org, alert_id=alert_id)
        return Response(AlertSerializer(alerts.alert_acknowledge(alert=alert, actor=request.auth.actor)).data)


class GateThresholdsView(PolicyView):
    serializer_class = policy_serializer("GateThresholds", Thresholds, change=False)
    change_serializer_class = policy_serializer("GateThresholdsChange", Thresholds, change=True, resettable=True)
    read, change = staticmethod(gates.thresholds_for), staticmethod(gates.thresholds_update)
    get_description = "What each gate check tolerates (defaults unless set)."
    put_description = "Change the named tolerances (null: back to the default); the others keep their values. Audited."


class CanaryPolicyView(PolicyView):
    serializer_class = policy_serializer("CanaryPolicy", CanaryPolicy, change=False)
    change_serializer_class = policy_serializer("CanaryPolicyChange", CanaryPolicy, change=True, resettable=True)
    read, change = staticmethod(canary.canary_policy_for), staticmethod(canary.canary_policy_update)
    get_description = ("How this organization's canaries run: the candidate's share of end users (sticky per `user`), the "
                       "interactions with a settled outcome each arm needs, and the changes the verdict tolerates (defaults "
                       "unless set).")
    put_description = ("Change the named settings (null: back to the default); the others keep their values. A canary running "
                       "now keeps its share; its verdict uses the new minimum and tolerances. Audited.")


class TrafficLimitsView(PolicyView):
    serializer_class = policy_serializer("TrafficLimits", Limits, change=False)
    change_serializer_class = policy_serializer("TrafficLimitsChange", Limits, change=True, resettable=True)
    read, change = staticmethod(traffic.traffic_limits_for), staticmethod(traffic.traffic_limits_update)
    get_description = ("This organization's share of the gateway: requests and tokens (prompt + completion) a minute, and "
                       "requests in flight at once (the deployment's defaults unless set). A limit of 0 suspends access.")
    put_description = "Change the named limits (null: back to the default); the gateway applies them within a second. Audited."
