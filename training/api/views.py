"""Training's part of the tenant API: the organization's reward spec."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.api.serializers import StrictSerializer
from tenants.models import Role
from training import rewards
from training.models import RewardSpec


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
