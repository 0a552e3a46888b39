from rest_framework.permissions import BasePermission

from tenants.models import Role
from tenants.organizations import Principal


class IsOrgMember(BasePermission):
    """Any authenticated principal; a view's `roles` ({"PUT": Role.ADMIN, ...}) raises the bar per method.
    A view of one object names its getter as `find` (called with org= and the URL's arguments,
    raising NotFound), so that a caller without the role learns nothing of ids not theirs."""

    def has_permission(self, request, view) -> bool:
        principal = request.auth
        if not isinstance(principal, Principal):
            return False
        needed = role_needed(view, request.method)
        if not principal.can(needed):
            find = getattr(view, "find", None)
            if find is not None and view.kwargs:
                # Another organization's id, or none at all, is 404 whatever the role: a 403 would
                # say that it exists somewhere.
                find(org=principal.org, **view.kwargs)
            self.message = f"This needs a key or member with the {needed} role; yours is {principal.role}."
            return False
        return True


def role_needed(view, method: str) -> str:
    """The role a method of a view needs. Django answers HEAD with the view's get(), so HEAD
    needs what GET needs (the export's decrypt once ran for a viewer's HEAD); OPTIONS only
    describes the endpoint, and DRF lists in it only the methods the caller may use."""
    roles = getattr(view, "roles", {})
    return roles.get("GET" if method == "HEAD" else method, Role.VIEWER)
