"""Training's part of the tenant API: the organization's reward spec, training schedule, runs and cycles."""

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.api.base import ERRORS, ListView, PolicyView, pages_ordered_by
from tenants.api.serializers import StrictSerializer, policy_serializer
from tenants.models import Role
from training import cycles, rewards, runs, schedules, selectors
from training.models import Cycle, TrainingRun
from training.rewards import RewardSpecValues


REWARD_SPEC = policy_serializer("RewardSpec", RewardSpecValues, change=False, extra={
    "version": serializers.IntegerField(help_text="0 for the default, which has never been changed."),
    "created_at": serializers.DateTimeField(allow_null=True),
    "created_by": serializers.CharField(allow_blank=True),
})


class RewardSpecView(PolicyView):
    serializer_class = REWARD_SPEC
    change_serializer_class = policy_serializer("RewardSpecChange", RewardSpecValues, change=True,
                                                help_texts={"weights": "Only the event types named change."})
    read, change = staticmethod(rewards.reward_spec_get), staticmethod(rewards.reward_spec_update)
    put_description = "A new version of the spec with the named fields changed (weights per event type); audited."


class TrainingScheduleView(PolicyView):
    serializer_class = policy_serializer("TrainingSchedule", schedules.Schedule, change=False, extra={
        "updated_at": serializers.DateTimeField(allow_null=True, help_text="Null while the defaults apply."),
    })
    change_serializer_class = policy_serializer("TrainingScheduleChange", schedules.Schedule, change=True)
    read, change = staticmethod(schedules.schedule_get), staticmethod(schedules.schedule_update)
    get_description = ("While enabled, a run starts when both hold: the cadence has passed since the last run started, and "
                       "enough feedback arrived since the last run's data. Only while the privacy policy's training_enabled is on.")


class TrainingRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=TrainingRun.Status.choices)
    trigger = serializers.ChoiceField(choices=TrainingRun.Trigger.choices)
    requested_by = serializers.CharField()
    incumbent = serializers.CharField(source="incumbent.name", allow_null=True, default=None,
                                      help_text="The adapter version serving when it started; null: the base model.")
    parent = serializers.CharField(source="parent.name", allow_null=True, default=None,
                                   help_text="The version it trains from: the incumbent, or, when erasure tainted that, its "
                                             "newest untainted ancestor; null: the base model.")
    candidate = serializers.CharField(source="candidate.name", allow_null=True, default=None,
                                      help_text="The adapter version it produced, once succeeded.")
    reward_spec_version = serializers.IntegerField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True, help_text="Its data: interactions and feedback after this time...")
    until = serializers.DateTimeField(allow_null=True, help_text="... and up to this one.")
    dataset = serializers.JSONField(allow_null=True, help_text="Examples, off-policy examples, and interactions left out by reason.")
    dataset_sha256 = serializers.CharField(help_text="Hash of the interaction ids, rewards and tokens it trained on.")
    report = serializers.JSONField(allow_null=True, help_text="The trainer's report: steps, tokens/s, mean loss and KL, clip fraction, seconds per stage; per_step: step, loss, kl and clip_fraction of each optimizer step.")
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


class StartableListView(ListView):
    """The organization's runs or cycles, newest first; POST (admins) starts one now."""

    # A subclass names its selector, its serializers, the service that starts one and, for the
    # schema, what starting does and why it may be refused.
    pagination_class = pages_ordered_by("-created_at")
    roles = {"POST": Role.ADMIN}
    start: staticmethod  # (org=, trigger=, actor=) -> the run or cycle queued
    started_serializer_class: type[serializers.Serializer]
    post_description = refused_description = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        extend_schema_view(post=extend_schema(
            request=TrainingRunCreateSerializer, description=cls.post_description,
            responses={202: cls.started_serializer_class, **ERRORS, 409: OpenApiResponse(description=cls.refused_description)},
        ))(cls)

    def post(self, request):
        TrainingRunCreateSerializer(data=request.data or {}).is_valid(raise_exception=True)
        started = self.start(org=request.auth.org, trigger=TrainingRun.Trigger.REQUEST, actor=request.auth.actor)
        return Response(self.started_serializer_class(started).data, status=status.HTTP_202_ACCEPTED)


class TrainingRunListView(StartableListView):
    serializer_class = started_serializer_class = TrainingRunSerializer
    selector, start = staticmethod(selectors.training_runs_list), staticmethod(runs.run_request)
    post_description = "Queue a training run now, whatever the schedule. Its candidate is registered, not served."
    refused_description = "Training is off, or a run is already active."


class TrainingRunView(APIView):
    @extend_schema(responses={200: TrainingRunDetailSerializer, **ERRORS})
    def get(self, request, run_id):
        return Response(TrainingRunDetailSerializer(runs.run_get(org=request.auth.org, run_id=run_id)).data)


class CycleSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=Cycle.Status.choices)
    adapter = serializers.CharField(source="candidate.name", allow_null=True, default=None,
                                    help_text="The candidate this cycle trained, once trained.")
    gate_report = serializers.JSONField(
        allow_null=True,
        help_text="Each gate's figures, interval, threshold and verdict; `sampling`: the global suite's looks (passes taken, "
                  "samples per model, alpha); each guardrail's `sequential.state` (within, beyond, undecided), and for the "
                  "cumulative detectors (`against: base`) the figure of every version of the lineage.")
    canary_report = serializers.JSONField(
        allow_null=True,
        help_text="The canary's sequential test, candidate vs. incumbent: settled outcomes and rates per arm, the decision, and "
                  "per check its always-valid interval and each claim's log-likelihood ratio against its boundary.")
    incumbent = serializers.CharField(source="incumbent.name", allow_null=True, default=None)
    training_run = serializers.UUIDField(source="training_run_id", allow_null=True)
    trigger = serializers.ChoiceField(choices=TrainingRun.Trigger.choices)
    requested_by = serializers.CharField()
    error = serializers.CharField()
    stage_seconds = serializers.JSONField(help_text="Wall time of each stage: train, gates, deploy (the canary starting to serve), canary.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class CycleListView(StartableListView):
    serializer_class, started_serializer_class = CycleSerializer, CycleCreatedSerializer
    selector, start = staticmethod(selectors.cycles_list), staticmethod(cycles.cycle_request)
    post_description = "Start a specialization cycle now: train, gate, canary, then promote or roll back."
    refused_description = "Training is off, or a cycle is already active."


class CycleView(APIView):
    @extend_schema(responses={200: CycleSerializer, **ERRORS})
    def get(self, request, cycle_id):
        return Response(CycleSerializer(cycles.cycle_get(org=request.auth.org, cycle_id=cycle_id)).data)
