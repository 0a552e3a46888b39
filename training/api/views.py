"""Training's part of the tenant API: the organization's reward spec, training schedule, runs and cycles."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.api.serializers import StrictSerializer
from tenants.api.views import ERRORS, ListView, pages_ordered_by
from tenants.models import Role
from training import cycles, rewards, runs
from training.models import Cycle, RewardSpec, TrainingRun


class RewardSpecSerializer(serializers.Serializer):
    version = serializers.IntegerField(help_text="0 for the default, which has never been changed.")
    weights = serializers.DictField(child=serializers.FloatField(), help_text="Reward per feedback event of each type; task_outcome's is multiplied by the outcome's value.")
    latency_penalty_per_s = serializers.FloatField(help_text="Subtracted per second of latency.")
    kl_coef = serializers.FloatField(help_text="How strongly each update is pulled towards the base model.")
    outcome_credit = serializers.ChoiceField(choices=RewardSpec.OutcomeCredit.choices, help_text="How a background task's outcome is spread over its steps.")
    outcome_discount = serializers.FloatField(help_text="For discounted credit: step i of n gets discount^(n-1-i), normalized.")
    created_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(allow_blank=True)


class RewardSpecUpdateSerializer(StrictSerializer):
    weights = serializers.DictField(child=serializers.FloatField(), required=False, help_text="Only the event types named change.")
    latency_penalty_per_s = serializers.FloatField(required=False)
    kl_coef = serializers.FloatField(required=False)
    outcome_credit = serializers.ChoiceField(choices=RewardSpec.OutcomeCredit.choices, required=False)
    outcome_discount = serializers.FloatField(required=False)


class RewardSpecView(APIView):
    roles = {"PUT": Role.ADMIN}

    @extend_schema(responses=RewardSpecSerializer)
    def get(self, request):
        return Response(RewardSpecSerializer(rewards.reward_spec_get(org=request.auth.org)).data)

    @extend_schema(request=RewardSpecUpdateSerializer,
                   responses={200: RewardSpecSerializer, 400: OpenApiResponse(description="Invalid input; `error.details` names each problem.")},
                   description="A new version of the spec with the named fields changed (weights per event type); audited.")
    def put(self, request):
        serializer = RewardSpecUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        spec = rewards.reward_spec_update(org=request.auth.org, changes=serializer.validated_data, actor=request.auth.actor)
        return Response(RewardSpecSerializer(spec).data)


class TrainingScheduleSerializer(serializers.Serializer):
    enabled = serializers.BooleanField(help_text="Off: runs start only when an admin asks (POST /api/v1/training-runs).")
    cadence_minutes = serializers.IntegerField(help_text="The least time between the starts of two scheduled runs.")
    min_feedback_events = serializers.IntegerField(help_text="The least feedback events since the last run's data that make a run worth it.")
    updated_at = serializers.DateTimeField(allow_null=True, help_text="Null while the defaults apply.")


class TrainingScheduleUpdateSerializer(StrictSerializer):
    enabled = serializers.BooleanField(required=False)
    cadence_minutes = serializers.IntegerField(required=False, min_value=runs.SCHEDULE_LIMITS["cadence_minutes"][0],
                                               max_value=runs.SCHEDULE_LIMITS["cadence_minutes"][1])
    min_feedback_events = serializers.IntegerField(required=False, min_value=runs.SCHEDULE_LIMITS["min_feedback_events"][0],
                                                   max_value=runs.SCHEDULE_LIMITS["min_feedback_events"][1])


class TrainingScheduleView(APIView):
    roles = {"PUT": Role.ADMIN}

    @extend_schema(responses=TrainingScheduleSerializer,
                   description="While enabled, a run starts when both hold: the cadence has passed since the last run "
                               "started, and enough feedback arrived since the last run's data. Only while the privacy "
                               "policy's training_enabled is on.")
    def get(self, request):
        return Response(TrainingScheduleSerializer(runs.schedule_get(org=request.auth.org)).data)

    @extend_schema(request=TrainingScheduleUpdateSerializer, responses={200: TrainingScheduleSerializer, **ERRORS})
    def put(self, request):
        serializer = TrainingScheduleUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        schedule = runs.schedule_update(org=request.auth.org, changes=serializer.validated_data, actor=request.auth.actor)
        return Response(TrainingScheduleSerializer(schedule).data)


class TrainingRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=TrainingRun.Status.choices)
    trigger = serializers.ChoiceField(choices=TrainingRun.Trigger.choices)
    requested_by = serializers.CharField()
    incumbent = serializers.CharField(source="incumbent.name", allow_null=True, default=None,
                                      help_text="The adapter version it trains from; null: the base model.")
    candidate = serializers.CharField(source="candidate.name", allow_null=True, default=None,
                                      help_text="The adapter version it produced, once succeeded.")
    reward_spec_version = serializers.IntegerField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True, help_text="Its data: interactions and feedback after this time...")
    until = serializers.DateTimeField(allow_null=True, help_text="... and up to this one.")
    dataset = serializers.JSONField(allow_null=True, help_text="Examples, off-policy examples, and interactions left out by reason.")
    dataset_sha256 = serializers.CharField(help_text="Hash of the interaction ids, rewards and tokens it trained on.")
    report = serializers.JSONField(allow_null=True, help_text="The trainer's report: steps, tokens/s, loss, KL, seconds per stage.")
    error = serializers.CharField(help_text="Why it failed.")
    attempts = serializers.IntegerField(help_text="Workers that took it up; more than one after a worker died.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class TrainingRunDetailSerializer(TrainingRunSerializer):
    interaction_ids = serializers.ListField(child=serializers.UUIDField(), help_text="Lineage: exactly the interactions it trained on.")


class TrainingRunCreateSerializer(StrictSerializer):
    pass


class CycleCreatedSerializer(serializers.Serializer):
    id = serializers.UUIDField()


class TrainingRunListView(ListView):
    pagination_class = pages_ordered_by("-created_at")
    roles = {"POST": Role.ADMIN}

    @extend_schema(responses=TrainingRunSerializer(many=True))
    def get(self, request):
        listed = TrainingRun.objects.for_org(request.auth.org).select_related("incumbent", "candidate").defer("interaction_ids")
        return self.paginated(listed, TrainingRunSerializer)

    @extend_schema(request=TrainingRunCreateSerializer,
                   responses={202: TrainingRunSerializer, **ERRORS,
                              409: OpenApiResponse(description="Training is off, or a run is already active.")},
                   description="Queue a training run now, whatever the schedule. Its candidate is registered, not served.")
    def post(self, request):
        TrainingRunCreateSerializer(data=request.data or {}).is_valid(raise_exception=True)
        run = runs.run_request(org=request.auth.org, trigger=TrainingRun.Trigger.REQUEST, actor=request.auth.actor)
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class TrainingRunView(APIView):
    @extend_schema(responses={200: TrainingRunDetailSerializer, **ERRORS})
    def get(self, request, run_id):
        return Response(TrainingRunDetailSerializer(runs.run_get(org=request.auth.org, run_id=run_id)).data)


class CycleSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=Cycle.Status.choices)
    adapter = serializers.CharField(source="candidate.name", allow_null=True, default=None,
                                    help_text="The candidate this cycle trained, once trained.")
    gate_report = serializers.JSONField(allow_null=True, help_text="Each gate's figures, interval, threshold and verdict.")
    canary_report = serializers.JSONField(allow_null=True, help_text="The A/B figures of the canary, candidate vs. incumbent.")
    incumbent = serializers.CharField(source="incumbent.name", allow_null=True, default=None)
    training_run = serializers.UUIDField(source="training_run_id", allow_null=True)
    trigger = serializers.ChoiceField(choices=TrainingRun.Trigger.choices)
    requested_by = serializers.CharField()
    error = serializers.CharField()
    stage_seconds = serializers.JSONField(help_text="Wall time of each stage: train, gates, deploy (the canary starting to serve), canary.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class CycleListView(ListView):
    pagination_class = pages_ordered_by("-created_at")
    roles = {"POST": Role.ADMIN}

    @extend_schema(responses=CycleSerializer(many=True))
    def get(self, request):
        return self.paginated(Cycle.objects.for_org(request.auth.org).select_related("candidate", "incumbent"), CycleSerializer)

    @extend_schema(request=TrainingRunCreateSerializer,
                   responses={202: CycleCreatedSerializer, **ERRORS,
                              409: OpenApiResponse(description="Training is off, or a cycle is already active.")},
                   description="Start a specialization cycle now: train, gate, canary, then promote or roll back.")
    def post(self, request):
        TrainingRunCreateSerializer(data=request.data or {}).is_valid(raise_exception=True)
        cycle = cycles.cycle_request(org=request.auth.org, trigger=TrainingRun.Trigger.REQUEST, actor=request.auth.actor)
        return Response({"id": str(cycle.pk)}, status=status.HTTP_202_ACCEPTED)


class CycleView(APIView):
    @extend_schema(responses={200: CycleSerializer, **ERRORS})
    def get(self, request, cycle_id):
        return Response(CycleSerializer(cycles.cycle_get(org=request.auth.org, cycle_id=cycle_id)).data)
