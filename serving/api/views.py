"""Serving's part of the tenant API: the organization's adapter versions."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from serving.models import AdapterVersion


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
