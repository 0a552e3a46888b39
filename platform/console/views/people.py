"""People and access: members (invite, change role, remove) and API keys (create, shown once;
revoke), with the API's rules on who may grant what (tenants.organizations)."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from console.access import Confirmation, Confirmed, Page
from tenants import invitations, organizations, selectors
from tenants.errors import Conflict, InvalidInput
from tenants.models import Role

ROLES = [(role.value, role.label) for role in Role]


class InviteForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=ROLES, initial=Role.VIEWER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLES)


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, so that it can be told apart later.")
    role = forms.ChoiceField(choices=ROLES, initial=Role.VIEWER)


def _shown_once(request, template: str, context: dict):
    """A secret's only showing: never stored by the browser or a proxy."""
    response = render(request, template, context)
    add_never_cache_headers(response)
    return response


class Members(Page):
    roles = {"POST": Role.ADMIN}

    def get(self, request, form=None):
        members = list(selectors.members_list(org=request.principal.org))
        for member in members:  # the API's rule: an admin manages admins and viewers, an owner everyone
            member.manageable = request.principal.can(Role.ADMIN) and request.principal.can(member.role)
        return render(request, "console/members.html", {
            "members": members,
            "invitation_hours": settings.CONSOLE_INVITATION_TTL_HOURS,
            "form": form or InviteForm(),
            "roles": ROLES,
        })

    def post(self, request):
        form = InviteForm(request.POST)
        if not form.is_valid():
            return self.get(request, form)
        try:
            membership, token = invitations.member_invite(org=request.principal.org, email=form.cleaned_data["email"],
                                                          role=form.cleaned_data["role"], by=request.principal)
        except (Conflict, InvalidInput) as error:
            form.add_error("email", error.message)
            return self.get(request, form)
        return _invitation_page(request, membership, token)


def _invitation_page(request, membership, token: str):
    url = request.build_absolute_uri(reverse("console:invitation", kwargs={"token": token}))
    return _shown_once(request, "console/invitation_link.html", {"membership": membership, "url": url})


class MemberRole(Page):
    find = staticmethod(organizations.membership_get)
    roles = {"POST": Role.ADMIN}

    def post(self, request, member_id):
        form = RoleForm(request.POST)
        if form.is_valid():
            try:
                organizations.member_set_role(membership=self.object, role=form.cleaned_data["role"], by=request.principal)
                messages.success(request, f"{self.object.user.email} is now {form.cleaned_data['role']}.")
            except Conflict as error:
                messages.error(request, error.message)
        return redirect("console:members")


class MemberInvitation(Page):
    """A new link for a member: their first, or a password reset (any unused one stops working)."""

    find = staticmethod(organizations.membership_get)
    roles = {"POST": Role.ADMIN}

    def post(self, request, member_id):
        return _invitation_page(request, self.object, invitations.member_reinvite(membership=self.object, by=request.principal))


class MemberRemove(Confirmed):
    find = staticmethod(organizations.membership_get)

    def confirmation(self, request) -> Confirmation:
        return Confirmation(f"Remove {self.object.user.email}?", [
            f"They lose access to {request.principal.org.name} at once.",
            "API keys they created, and keys made with those, are revoked."], "Remove member", reverse("console:members"))

    def post(self, request, member_id):
        try:
            organizations.member_remove(membership=self.object, by=request.principal)
            messages.success(request, f"{self.object.user.email} was removed; their keys were revoked.")
        except Conflict as error:
            messages.error(request, error.message)
        return redirect("console:members")


class ApiKeys(Page):
    roles = {"POST": Role.ADMIN}

    def get(self, request, form=None):
        keys = list(selectors.api_keys_list(org=request.principal.org))
        for key in keys:
            key.manageable = request.principal.can(Role.ADMIN) and request.principal.can(key.role) and key.revoked_at is None
        return render(request, "console/api_keys.html", {
            "keys": keys,
            "form": form or ApiKeyForm(),
        })

    def post(self, request):
        form = ApiKeyForm(request.POST)
        if not form.is_valid():
            return self.get(request, form)
        api_key, raw_key = organizations.api_key_issue(org=request.principal.org, name=form.cleaned_data["name"],
                                                       role=form.cleaned_data["role"], by=request.principal)
        return _shown_once(request, "console/api_key_created.html", {"api_key": api_key, "raw_key": raw_key})


class ApiKeyRevoke(Confirmed):
    find = staticmethod(organizations.api_key_get)

    def confirmation(self, request) -> Confirmation:
        return Confirmation(f"Revoke the key {self.object.name} ({self.object.prefix}…)?", [
            "Requests with it are refused at once; this cannot be undone.",
            "Keys created with it are revoked too."], "Revoke key", reverse("console:api-keys"))

    def post(self, request, key_id):
        try:
            revoked = organizations.api_key_revoke(api_key=self.object, by=request.principal)
            messages.success(request, f"The key {revoked.name} ({revoked.prefix}…) is revoked.")
        except Conflict as error:
            messages.error(request, error.message)
        return redirect("console:api-keys")
