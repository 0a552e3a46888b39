"""Invitations: the single-use links through which people set a password, or join with the
one they have, and enter the console.

An invitation belongs to a membership that already exists (adding a member makes both), so an
unaccepted link grants nothing the membership does not. A new link for the same member
replaces any unused one; that is also how a password is reset. A person's account is one
across their organizations, and the link is handed to whoever invited, so:

- a link sets a password only when its organization already decides everything the account
  reaches (the person belongs to no other organization), or the platform's operator made it
  (`manage.py invite`); an admin of one organization cannot take over a member of another;
- a membership added to an account that already has a password grants nothing until its
  person, logged in, accepts its link (`invitation_join`): whoever holds that password may not
  be the person the organization means (an admin elsewhere could have made the account first).
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from tenants.audit import audit_record
from tenants.errors import Conflict, InvalidInput, NotFound
from tenants.models import Invitation, Membership, Organization, Role
from tenants.organizations import Principal, member_add, require_can_grant

OPERATOR = "operator"  # the actor of what the platform's operator does from the command line


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_create(*, membership: Membership, actor: str) -> tuple[Invitation, str]:
    """A new link for the member (any unused one stops working); returns it and its token in
    clear, which is shown once."""
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        Invitation.objects.for_org(membership.org).filter(membership=membership, accepted_at__isnull=True).delete()
        invitation = Invitation.objects.create(
            org=membership.org, membership=membership, token_hash=_hash(token), created_by=actor,
            expires_at=timezone.now() + timedelta(hours=settings.CONSOLE_INVITATION_TTL_HOURS),
        )
        audit_record(org=membership.org, actor=actor, action="member.invite", target=membership.user.email,
                     after={"role": membership.role, "expires_at": invitation.expires_at.isoformat()})
    return invitation, token


def member_reinvite(*, membership: Membership, by: Principal) -> str:
    """A new link for a member already there, by someone who may manage their role: their first,
    or a password reset. Returns the token in clear."""
    require_can_grant(by, membership.role)
    _, token = invitation_create(membership=membership, actor=by.actor)
    return token


def member_invite(*, org: Organization, email: str, role: str | None, by: Principal) -> tuple[Membership, str]:
    """Invite a person: a new member with `role` (viewer when not given), or a new link for a
    member already there (their role stays, unless `role` names another: then refused)."""
    membership = Membership.objects.for_org(org).select_related("user").filter(user__username=email.strip().lower()).first()
    if membership is None:
        membership = member_add(org=org, email=email, role=role or Role.VIEWER, by=by)
        _, token = invitation_create(membership=membership, actor=by.actor)
        return membership, token
    if role is not None and role != membership.role:
        require_can_grant(by, membership.role)
        raise Conflict(f"{membership.user.email} is already a member, as {membership.role}: change the role first.")
    return membership, member_reinvite(membership=membership, by=by)


@dataclass(frozen=True)
class Pending:
    """An invitation that can still be used, and what it lets its holder do."""

    invitation: Invitation
    may_set_password: bool  # else: the person's account reaches organizations other than this link's


def invitation_pending(*, token: str) -> Pending:
    """The usable invitation of this token, or NotFound (unknown, used, expired or replaced)."""
    # The token is the one thing known before the organization, like an API key.
    invitation = (Invitation.objects.across_orgs().select_related("org", "membership__user")
                  .filter(token_hash=_hash(token), accepted_at__isnull=True, expires_at__gt=timezone.now()).first())
    if invitation is None:
        raise NotFound("This invitation link is not valid: it was used, it expired, or a newer one replaced it. "
                       "Ask an admin of your organization for a new one.")
    # The link is handed to whoever invited, so setting a password through it is deciding the
    # account: allowed only where that reaches no other organization, with or without a password
    # there yet (else one organization's admin could enter another as its owner).
    elsewhere = (Membership.objects.across_orgs().filter(user=invitation.membership.user)
                 .exclude(org=invitation.org).exists())
    return Pending(invitation=invitation, may_set_password=not elsewhere or invitation.created_by == OPERATOR)


def invitation_join(*, token: str, user) -> Membership:
    """The logged-in `user` accepts the link of their own membership with the password they
    have: it grants what it says from now on."""
    with transaction.atomic():
        invitation = invitation_pending(token=token).invitation
        membership = invitation.membership
        if membership.user_id != user.pk:
            raise Conflict(f"This link is for {membership.user.email}: log out, and log in as that account to use it.")
        _use(invitation)
        audit_record(org=invitation.org, actor=f"user:{user.email}", action="member.join", target=user.email)
    membership.refresh_from_db()
    return membership


def _use(invitation: Invitation) -> None:
    """Use the link up, and let its membership in (if it was waiting)."""
    now = timezone.now()
    used = Invitation.objects.for_org(invitation.org).filter(pk=invitation.pk, accepted_at__isnull=True).update(accepted_at=now)
    if used != 1:  # the same link, used twice at once
        raise NotFound("This invitation link was just used.")
    Membership.objects.for_org(invitation.org).filter(pk=invitation.membership_id, joined_at__isnull=True).update(joined_at=now)


def invitation_accept(*, token: str, password: str) -> Membership:
    """Set the member's password through the link and use it up; InvalidInput names what
    Django's password validators found wrong."""
    with transaction.atomic():
        pending = invitation_pending(token=token)
        invitation = pending.invitation
        if not pending.may_set_password:
            raise Conflict("Your account belongs to other organizations too, so a link from one of them cannot set its "
                           "password: log in with the one you have, or ask the platform's operator for a link.")
        user = invitation.membership.user
        try:
            validate_password(password, user)
        except ValidationError as error:
            raise InvalidInput(" ".join(error.messages), details={"password": " ".join(error.messages)}) from None
        _use(invitation)
        user.set_password(password)
        user.save(update_fields=["password"])
        audit_record(org=invitation.org, actor=f"user:{user.email}", action="member.password_set", target=user.email)
    return invitation.membership

