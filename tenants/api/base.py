"""What every part of the tenant API shares: cursor pages, list views, the policy view, input
validation and the documented errors."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.models import Role

ERRORS = {
    400: OpenApiResponse(description="Invalid input; `error.details` names each problem."),
    404: OpenApiResponse(description="No such object in this organization."),
}


class Page(CursorPagination):
    """Cursor pages stay correct while new rows arrive, unlike offsets."""

    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isascii() and raw.isdigit() and 0 < int(raw)):  # "²" is a digit to isdigit
            raise ValidationError({"limit": [f"A whole number from 1 to {self.max_page_size}, not {raw!r}."]})
        return super().get_page_size(request)

    def paginate_queryset(self, queryset, request, view=None):
        self.model = queryset.model  # what a cursor's position is read as
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        refused = ValidationError({"cursor": ["Not a cursor this API gave out: use `next` or `previous` as given."]})
        try:
            cursor = super().decode_cursor(request)
        except NotFound:  # DRF's answer to a cursor it cannot read; the request is what is wrong
            raise refused from None
        # The position goes into the query as it came: one its field cannot read would fail the
        # query (a 500), and a NUL would fail it on PostgreSQL.
        if cursor is not None and cursor.position is not None:
            if "\x00" in cursor.position:
                raise refused
            try:
                self.model._meta.get_field(self.ordering[0].lstrip("-")).to_python(cursor.position)
            except DjangoValidationError:
                raise refused from None
        return cursor


def pages_ordered_by(field: str) -> type[Page]:
    """Pages by `field`, then by id: rows stored together share a time (a feedback batch), and a
    cursor steps over equals by counting them, which holds only if they always come in one order
    (PostgreSQL gives none of its own)."""
    return type(f"PageBy{field.strip('-').title()}", (Page,), {"ordering": (field, "-pk" if field.startswith("-") else "pk")})


class ListView(ListAPIView):
    """One page of the organization's list; `cursor` and `limit` page through it."""

    # A subclass names its selector (called with org=, and filters= from the query string when
    # `filters` names a serializer of them) and its serializer_class.
    selector: staticmethod
    filters: type[serializers.Serializer] | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.filters is not None:  # documented as the GET's query parameters
            extend_schema_view(get=extend_schema(parameters=[cls.filters]))(cls)

    def get_queryset(self):
        org = self.request.auth.org
        if self.filters is None:
            return self.selector(org=org)
        return self.selector(org=org, filters=filters_of(self.filters, self.request))


class PolicyView(APIView):
    """The organization's policy: GET reads it; PUT (admins) changes the named settings and
    answers the policy as it now is."""

    # A subclass names its shapes, its two services (which validate, tenants.ranges, and audit)
    # and what each method does, for the schema.
    roles = {"PUT": Role.ADMIN}
    serializer_class: type[serializers.Serializer]
    change_serializer_class: type[serializers.Serializer]
    read: staticmethod  # (org=) -> the policy
    change: staticmethod  # (org=, changes=, actor=) -> the policy after the change
    get_description = put_description = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            get=extend_schema(responses=cls.serializer_class, description=cls.get_description),
            put=extend_schema(request=cls.change_serializer_class, responses={200: cls.serializer_class, **ERRORS},
                              description=cls.put_description),
        )(cls)

    def get(self, request):
        return Response(self.serializer_class(self.read(org=request.auth.org)).data)

    def put(self, request):
        policy = self.change(org=request.auth.org, changes=request.data, actor=request.auth.actor)
        return Response(self.serializer_class(policy).data)


def validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def filters_of(serializer_class, request) -> dict:
    """Validated query-string filters, without the pagination parameters."""
    query = {k: v for k, v in request.query_params.items() if k not in ("cursor", "limit")}
    return {k: v for k, v in validated(serializer_class, query).items() if v is not None}
