"""Organizations, their members and API keys."""

import hashlib
import logging
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from tenants import data_keys
from tenants.audit import audit_record
from tenants.privacy import policy_validate
from tenants.ranges import policy_values
from tenants.signals import organization_deleted
from tenants.errors import Conflict, Forbidden, InvalidInput, NotFound
from tenants.models import ApiKey, Membership, Organization, PrivacyPolicy, Role, role_at_least

log = logging.getLogger(__name__)

KEY_PREFIX = "osk_"
KEY_LENGTH = len(KEY_PREFIX) + 43  # secrets.token_urlsafe(32)
_KEY_BODY = re.compile(r"[A-Za-z0-9_-]+")
# Writing last_used_at on every request would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class Principal:
    """Who is calling, on behalf of which organization, with which rights."""

    org: Organization
    role: str
    actor: str  # "key:<prefix>" or "user:<email>", as written in the audit log
    api_key_id: uuid.UUID | None = None  # the key it authenticated with, if any

    def can(self, role: str) -> bool:
        return role_at_least(self.role, role)


def _unique_slug(name: str) -> str:
    base = slugify(name)[:50] or "org"
    slug, n = base, 1
    while Organization.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def org_create(*, name: str, owner_email: str, policy: dict | None = None) -> tuple[Organization, str]:
    """Create an organization with its owner, privacy policy, data key and an owner API key.

    Returns the organization and the key in clear: it is shown once and never again.
    """
    name, owner_email = name.strip(), owner_email.strip().lower()
    if not name:
        raise InvalidInput("An organization needs a name.")
    if "@" not in owner_email:
        raise InvalidInput(f"{owner_email!r} is not an email address.")
    settings = policy_values(policy_validate(policy or {}))
    with transaction.atomic():
        org = Organization.objects.create(slug=_unique_slug(name), name=name)
        PrivacyPolicy.objects.create(org=org, **settings)
        data_keys.data_key_create(org=org)
        owner = user_for_email(owner_email)
        Membership.objects.create(org=org, user=owner, role=Role.OWNER)
        actor = f"user:{owner_email}"
        audit_record(org=org, actor=actor, action="organization.create", after={"name": name, "owner": owner_email})
        _, raw_key = api_key_create(org=org, name="owner key", role=Role.OWNER, actor=actor)
    return org, raw_key


def org_delete(*, org: Organization, confirm_slug: str) -> None:
    """Delete an organization and everything of it, destroying its data keys first.

    `confirm_slug` must repeat the organization's slug: deletion cannot be undone. The keys go
    in their own committed transaction before any row is deleted: if deletion fails half-way,
    what is left is already unreadable.
    """
    if confirm_slug != org.slug:
        raise InvalidInput(f'To delete the organization, confirm with its slug: {{"confirm": "{org.slug}"}}.')
    data_keys.org_keys_shred(org=org)
    org_id = org.pk
    with transaction.atomic():
        members = list(Membership.objects.for_org(org).values_list("user_id", flat=True))
        Organization.objects.filter(pk=org_id).delete()
        # People who belonged to no other organization go too: their email is personal data.
        get_user_model().objects.filter(pk__in=members, memberships__isnull=True, is_staff=False).delete()
    organization_deleted.send(sender=Organization, org_id=org_id, slug=org.slug)
    log.info("Deleted organization %s", org.slug)


def user_for_email(email: str):
    User = get_user_model()
    most = User._meta.get_field("username").max_length  # the account's key is its email
    if len(email) > most:
        raise InvalidInput(f"An email address here may have at most {most} characters.", details={"email": f"At most {most} characters."})
    user, created = User.objects.get_or_create(username=email, defaults={"email": email})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def member_add(*, org: Organization, email: str, role: str, by: Principal) -> Membership:
    require_can_grant(by, role)
    email = email.strip().lower()
    if Membership.objects.for_org(org).filter(user__username=email).exists():
        raise Conflict(f"{email} is already a member.")
    with transaction.atomic():
        _lock(org)  # two additions at once count one another
        if Membership.objects.for_org(org).count() >= settings.MAX_MEMBERS:
            raise Conflict(f"The organization has {settings.MAX_MEMBERS} members, the most it may have: remove one first.")
        user = user_for_email(email)
        # Whoever holds the account's password may not be the person this organization means: it
        # waits for them to accept its link, logged in. (An account without one is entered only
        # through a link that may set it.)
        joined = None if user.has_usable_password() else timezone.now()
        membership = Membership.objects.create(org=org, user=user, role=role, joined_at=joined)
        audit_record(org=org, actor=by.actor, action="member.add", target=user.email, after={"role": role})
    return membership


def _lock(org: Organization) -> None:
    """Hold the organization's row until the transaction ends (PostgreSQL; SQLite's write
    transactions hold the whole database already)."""
    Organization.objects.select_for_update().filter(pk=org.pk).exists()


def member_set_role(*, membership: Membership, role: str, by: Principal) -> Membership:
    require_can_grant(by, role)
    require_can_grant(by, membership.role)
    if membership.role == Role.OWNER and role != Role.OWNER:
        _require_another_owner(membership)
    before = membership.role
    with transaction.atomic():
        membership.role = role
        membership.save(update_fields=["role"])
        revoked = _revoke_keys_of(membership, above=role, by=by)
        audit_record(org=membership.org, actor=by.actor, action="member.role", target=membership.user.email,
                     before={"role": before}, after={"role": role, "revoked_keys": revoked})
    return membership


def member_remove(*, membership: Membership, by: Principal) -> None:
    require_can_grant(by, membership.role)
    if membership.role == Role.OWNER:
        _require_another_owner(membership)
    with transaction.atomic():
        revoked = _revoke_keys_of(membership, above=None, by=by)
        membership.delete()
        audit_record(org=membership.org, actor=by.actor, action="member.remove", target=membership.user.email,
                     before={"role": membership.role}, after={"revoked_keys": revoked})


def _revoke_keys_of(membership: Membership, *, above: str | None, by: Principal) -> list[str]:
    """Revoke the keys a member created that carry more than `above` (all of them for None),
    and every key minted with those: a key must not keep rights its creator has lost."""
    keys_of_member = ApiKey.objects.for_org(membership.org).filter(created_by=f"user:{membership.user.email}", revoked_at__isnull=True)
    return _revoke_with_minted(membership.org, [k for k in keys_of_member if above is None or not role_at_least(above, k.role)])


def _revoke_with_minted(org: Organization, keys: list[ApiKey]) -> list[str]:
    """Revoke these keys and, transitively, every live key minted with one of them."""
    doomed = _with_minted(org, keys)
    ApiKey.objects.for_org(org).filter(pk__in=[k.pk for k in doomed]).update(revoked_at=timezone.now())
    return [k.prefix for k in doomed]


def _with_minted(org: Organization, keys: list[ApiKey]) -> list[ApiKey]:
    found, frontier = {}, keys
    while frontier:
        found.update((k.pk, k) for k in frontier)
        minted = ApiKey.objects.for_org(org).filter(minted_by__in=[k.pk for k in frontier], revoked_at__isnull=True)
        frontier = [k for k in minted if k.pk not in found]
    return list(found.values())


def require_can_grant(by: Principal, role: str) -> None:
    if not by.can(Role.ADMIN) or not by.can(role):
        raise Forbidden(f"A {by.role} cannot grant or change the role {role}.")


def _require_another_owner(membership: Membership) -> None:
    owners = Membership.objects.for_org(membership.org).filter(role=Role.OWNER).exclude(pk=membership.pk)
    if not owners.exists():
        raise Conflict("An organization keeps at least one owner.")


def _hash(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def api_key_create(*, org: Organization, name: str, role: str, actor: str,
                   minted_by: uuid.UUID | None = None) -> tuple[ApiKey, str]:
    raw_key = KEY_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        _lock(org)
        if ApiKey.objects.for_org(org).filter(revoked_at__isnull=True).count() >= settings.MAX_API_KEYS:
            raise Conflict(f"The organization has {settings.MAX_API_KEYS} API keys in use, the most it may have: revoke one first.")
        api_key = ApiKey.objects.create(
            org=org, name=name, role=role, prefix=raw_key[:12], key_hash=_hash(raw_key), created_by=actor, minted_by_id=minted_by,
        )
        audit_record(org=org, actor=actor, action="api_key.create", target=api_key.prefix, after={"name": name, "role": role})
    return api_key, raw_key


def api_key_issue(*, org: Organization, name: str, role: str, by: Principal) -> tuple[ApiKey, str]:
    """A key made by a caller, who cannot hand out more rights than they hold."""
    if not by.can(role):
        raise Forbidden(f"A {by.role} cannot create a key with the {role} role.")
    return api_key_create(org=org, name=name, role=role, actor=by.actor, minted_by=by.api_key_id)


def api_key_revoke(*, api_key: ApiKey, by: Principal) -> ApiKey:
    """Revoke a key and every key minted with it, unless that would leave an organization whose
    owners cannot log in without an owner key: nobody could ever act as its owner again."""
    require_can_grant(by, api_key.role)
    if api_key.revoked_at is None:
        with transaction.atomic():
            doomed = _with_minted(api_key.org, [api_key])
            _require_a_way_in_as_owner(api_key.org, after_revoking=doomed)
            revoked = _revoke_with_minted(api_key.org, doomed)
            audit_record(org=api_key.org, actor=by.actor, action="api_key.revoke", target=api_key.prefix,
                         after={"revoked_keys": revoked})
        api_key.refresh_from_db(fields=["revoked_at"])
    return api_key


def _require_a_way_in_as_owner(org: Organization, *, after_revoking: list[ApiKey]) -> None:
    owner_keys_left = (ApiKey.objects.for_org(org).filter(role=Role.OWNER, revoked_at__isnull=True)
                       .exclude(pk__in=[k.pk for k in after_revoking]))
    owners = Membership.objects.for_org(org).filter(role=Role.OWNER, joined_at__isnull=False).select_related("user")
    if not owner_keys_left.exists() and not any(m.user.has_usable_password() for m in owners):
        raise Conflict("That would revoke the organization's last owner key, and no owner can log in: "
                       "let an owner set a password first.")


def api_key_well_formed(raw_key: str) -> bool:
    """Whether `raw_key` could be a key this platform made (api_key_create), told without the
    database: what is not needs no lookup."""
    return len(raw_key) == KEY_LENGTH and raw_key.startswith(KEY_PREFIX) and _KEY_BODY.fullmatch(raw_key, len(KEY_PREFIX)) is not None


def bearer_key(authorization: str) -> str | None:
    """The key an Authorization header carries ("Bearer <key>"), or None when it carries none of
    a key's shape: what needs no lookup."""
    scheme, _, raw_key = authorization.partition(" ")
    raw_key = raw_key.strip()
    return raw_key if scheme.lower() == "bearer" and api_key_well_formed(raw_key) else None


def api_key_hash(raw_key: str) -> str:
    return _hash(raw_key)


def api_key_hashes(*, created_since: datetime | None = None) -> list[str]:
    """The hashes of the keys in use, every organization's, or of those made since
    `created_since`: authentication's one lookup across organizations, in bulk."""
    keys = ApiKey.objects.across_orgs().filter(revoked_at__isnull=True)
    if created_since is not None:
        keys = keys.filter(created_at__gte=created_since)
    return list(keys.values_list("key_hash", flat=True))


def api_key_authenticate(raw_key: str) -> Principal | None:
    """The principal a bearer key stands for, or None for an unknown or revoked key."""
    if not api_key_well_formed(raw_key):
        return None
    # Authentication is the one lookup that cannot know the organization in advance.
    api_key = ApiKey.objects.across_orgs().select_related("org").filter(key_hash=_hash(raw_key), revoked_at__isnull=True).first()
    if api_key is None:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.for_org(api_key.org).filter(pk=api_key.pk).update(last_used_at=now)
    return Principal(org=api_key.org, role=api_key.role, actor=f"key:{api_key.prefix}", api_key_id=api_key.pk)


def membership_principal(*, user, org_id=None) -> Principal | None:
    """The principal of a console user: their membership in the chosen (or only) organization,
    once they joined it."""
    memberships = Membership.objects.across_orgs().select_related("org").filter(user=user, joined_at__isnull=False)
    if org_id is not None:
        memberships = memberships.filter(org_id=org_id)
    found = list(memberships[:2])
    if len(found) != 1:
        return None
    return Principal(org=found[0].org, role=found[0].role, actor=f"user:{user.email}")


def memberships_of(*, user) -> list[Membership]:
    """A person's memberships in every organization they joined, by the organization's name."""
    return list(Membership.objects.across_orgs().select_related("org").filter(user=user, joined_at__isnull=False)
                .order_by("org__name", "org__slug"))


def api_key_get(*, org: Organization, key_id) -> ApiKey:
    api_key = ApiKey.objects.for_org(org).filter(pk=key_id).first()
    if api_key is None:
        raise NotFound("No such API key.")
    return api_key


def membership_get(*, org: Organization, member_id) -> Membership:
    membership = Membership.objects.for_org(org).select_related("user", "org").filter(public_id=member_id).first()
    if membership is None:
        raise NotFound("No such member.")
    return membership
