from rest_framework.permissions import BasePermission

from tenants.models import Role
from tenants.organizations import Principal


class IsOrgMember(BasePermission):
    """Any authenticated principal; a view's `roles` ({"PUT": Role.ADMIN, ...}) raises the bar per method."""

    def has_permission(self, request, view) -> bool:
        principal = request.auth
        if not isinstance(principal, Principal):
            return False
        needed = getattr(view, "roles", {}).get(request.method, Role.VIEWER)
        if not principal.can(needed):
            self.message = f"This needs a key or member with the {needed} role; yours is {principal.role}."
            return False
        return True
