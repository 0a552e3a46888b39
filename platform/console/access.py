"""Who is acting in the console, and what they may do: the same `Principal` and role rules as
the API (tenants.organizations), so that the two can never disagree.

A logged-in person acts in one organization at a time, the one chosen in their session (the
switcher), with the role they hold there. Each page is a `Page`: it names the role each method
needs (`roles`, viewer by default, as in the API's views) and, for a page of one object, the
service that finds it (`find`), so that another organization's id is a 404 whatever the role.
"""

from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views import View

from serving.selectors import open_alerts_count
from tenants.errors import Forbidden, NotFound
from tenants.models import Role
from tenants.organizations import Principal, membership_principal, memberships_of

SESSION_ORG = "org_id"  # the organization the person acts in; the API's session authentication reads it too


def principal_of(request) -> Principal | None:
    """The person's principal in the organization chosen in their session; the first of their
    organizations when none is chosen (or the chosen one no longer has them)."""
    principal = membership_principal(user=request.user, org_id=request.session.get(SESSION_ORG))
    if principal is None:
        memberships = memberships_of(user=request.user)
        if not memberships:
            return None
        principal = membership_principal(user=request.user, org_id=memberships[0].org_id)
        request.session[SESSION_ORG] = str(memberships[0].org_id)
    return principal


def role_needed(page: "Page", method: str) -> str:
    # Django answers HEAD with get(): HEAD needs what GET needs.
    return page.roles.get("GET" if method == "HEAD" else method, Role.VIEWER)


class Page(View):
    """A console page of the person's current organization."""

    roles: dict[str, str] = {}
    find = None  # staticmethod(org=, **url kwargs) -> the object, raising NotFound

    def dispatch(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        principal = principal_of(request)
        if principal is None:
            logout(request)
            messages.error(request, "You are no longer a member of any organization.")
            return redirect("console:login")
        request.principal = principal
        try:
            if self.find is not None and kwargs:
                # Before the role check: another organization's id is 404, never 403.
                self.object = type(self).find(org=principal.org, **kwargs)
            if not principal.can(role_needed(self, request.method)):
                raise PermissionDenied(f"This needs the {role_needed(self, request.method)} role; yours is {principal.role}.")
            return super().dispatch(request, *args, **kwargs)
        except NotFound as error:
            raise Http404(error.message) from None
        except Forbidden as error:
            raise PermissionDenied(error.message) from None


@dataclass
class Confirmation:
    title: str
    consequences: list[str] = field(default_factory=list)
    action: str = "Confirm"  # the button that does it
    back: str = "/console/"  # where Cancel goes


class Confirmed(Page):
    """A page of a change that cannot be undone: GET asks, saying what will happen; POST does it.
    Admins only, unless a subclass says otherwise."""

    roles = {"GET": Role.ADMIN, "POST": Role.ADMIN}

    def confirmation(self, request) -> Confirmation:
        raise NotImplementedError

    def get(self, request, **kwargs):
        return render(request, "console/confirm.html", {"confirmation": self.confirmation(request)})


def navigation(request) -> dict:
    """The base layout's context (a template context processor): who is acting, where, and the
    organizations they can switch to."""
    principal = getattr(request, "principal", None)
    if principal is None:
        return {}
    return {"principal": principal, "memberships": memberships_of(user=request.user), "is_admin": principal.can(Role.ADMIN),
            "is_owner": principal.can(Role.OWNER), "open_alerts": open_alerts_count(org=principal.org)}
