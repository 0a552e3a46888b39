"""Getting in and out: login (failed tries throttled by django-axes), logout, invitation links
(tenants/invitations.py), and switching between one's organizations."""

import uuid

from django import forms
from django.contrib import messages
from django.contrib.auth import authenticate, login, logout
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from console.access import SESSION_ORG, principal_of
from tenants.errors import Conflict, InvalidInput, NotFound
from tenants.invitations import invitation_accept, invitation_join, invitation_pending
from tenants.organizations import membership_principal


def login_username(request, credentials) -> str:
    """The account a login try counts against (django-axes' AXES_USERNAME_CALLABLE): the email as
    the form reads it, so that "Dana@X" and "dana@x " are one account's tries, not two."""
    return str((credentials or {}).get("username") or request.POST.get("username", "")).strip().lower()


class EmailLoginForm(AuthenticationForm):
    """People log in with their email, which is their username (tenants.organizations.user_for_email)."""

    username = forms.EmailField(label="Email", widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"}))
    error_messages = {**AuthenticationForm.error_messages,
                      "invalid_login": "Enter a correct email and password. Repeated failures pause logins for a while."}

    def clean(self):
        if self.cleaned_data.get("username"):
            self.cleaned_data["username"] = self.cleaned_data["username"].strip().lower()
        return super().clean()


class Login(LoginView):
    template_name = "console/login.html"
    form_class = EmailLoginForm
    redirect_authenticated_user = True

    def form_valid(self, form):
        response = super().form_valid(form)
        principal_of(self.request)  # chooses the person's first organization
        return response


class Logout(View):
    def post(self, request):
        logout(request)
        messages.info(request, "You are logged out.")
        return redirect("console:login")


class PasswordForm(forms.Form):
    password = forms.CharField(widget=forms.PasswordInput(attrs={"autocomplete": "new-password", "autofocus": True}))
    confirm = forms.CharField(label="The same password again", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("password") != data.get("confirm"):
            self.add_error("confirm", "The two passwords differ.")
        return data


class InvitationAccept(View):
    """The link of an invitation: set a password, and land in the console in its organization."""

    def get(self, request, token):
        return self._page(request, token, PasswordForm())

    def post(self, request, token):
        if "join" in request.POST:
            return self._join(request, token)
        form = PasswordForm(request.POST)
        if form.is_valid():
            try:
                membership = invitation_accept(token=token, password=form.cleaned_data["password"])
            except InvalidInput as error:
                form.add_error("password", error.message)
            except Conflict as error:
                messages.error(request, error.message)
                return redirect("console:login")
            except NotFound as error:
                raise Http404(error.message) from None
            else:
                user = authenticate(request, username=membership.user.username, password=form.cleaned_data["password"])
                login(request, user)
                request.session[SESSION_ORG] = str(membership.org_id)
                messages.success(request, f"Welcome to {membership.org.name}.")
                return redirect("console:home")
        return self._page(request, token, form)

    def _join(self, request, token):
        """Logged in with the password they have, the person accepts their membership."""
        if not request.user.is_authenticated:
            return redirect(f"{reverse('console:login')}?next={request.path}")
        try:
            membership = invitation_join(token=token, user=request.user)
        except Conflict as error:
            messages.error(request, error.message)
            return redirect(request.path)
        except NotFound as error:
            raise Http404(error.message) from None
        request.session[SESSION_ORG] = str(membership.org_id)
        messages.success(request, f"Welcome to {membership.org.name}.")
        return redirect("console:home")

    def _page(self, request, token, form):
        try:
            pending = invitation_pending(token=token)
        except NotFound as error:
            raise Http404(error.message) from None
        membership = pending.invitation.membership
        joining = request.user.is_authenticated and request.user.pk == membership.user_id and membership.joined_at is None
        return render(request, "console/invitation.html", {"pending": pending, "invitation": pending.invitation, "form": form,
                                                           "joining": joining})


class SwitchOrganization(View):
    """Act in another of one's organizations, with the role held there."""

    def post(self, request):
        if not request.user.is_authenticated:
            return redirect("console:login")
        principal = membership_principal(user=request.user, org_id=_uuid_or_none(request.POST.get("org")))
        if principal is None:
            raise Http404("You are not a member of that organization.")
        request.session[SESSION_ORG] = str(principal.org.pk)
        return redirect("console:home")


def _uuid_or_none(value):
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
