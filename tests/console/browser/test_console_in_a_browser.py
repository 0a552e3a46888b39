"""The console's main paths in a real browser: getting in and out, throttled logins, a policy
change seen through the API, an API key's whole life, what a viewer sees, another
organization's ids, the organization switcher and the interactions' filters in place, and a
cycle's page: its training plots and a waiting canary's evidence."""

import io
import json

import httpx
import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from serving.canary_rule import Arm, canary_decide
from serving.deployments import deploy_switch
from serving.policies import CanaryPolicy
from serving.sequential import Moments
from tenants.models import Role
from tenants.recording import task_create
from training.models import Cycle, TrainingRun
from tests.console.conftest import PASSWORD, person
from tests.factories import make_tenant, registered_adapter, served

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.one_database]


def log_in(page: Page, server: str | None, email: str, password: str = PASSWORD) -> None:
    """Log in on the login page (server: open it first; None: the page is on it already)."""
    if server is not None:
        page.goto(f"{server}/console/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def go(page: Page, name: str) -> None:
    """Follow a link of the side navigation."""
    page.get_by_role("navigation", name="Console").get_by_role("link", name=name, exact=True).click()


def test_a_person_accepts_an_invitation_sets_a_password_and_lands_in_the_console(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    out = io.StringIO()
    call_command("invite", org="acme", email="dana@acme.example", role="admin", base_url=live_server.url, stdout=out)
    page.goto(json.loads(out.getvalue())["url"])
    expect(page.get_by_role("heading", name="Join Acme")).to_be_visible()
    screenshot("invitation")
    page.get_by_label("Password", exact=True).fill("correct horse battery staple")
    page.get_by_label("The same password again").fill("correct horse battery staple")
    page.get_by_role("button", name="Set password and enter").click()
    expect(page.get_by_role("heading", name="Acme")).to_be_visible()
    expect(page.get_by_text("Welcome to Acme.")).to_be_visible()
    expect(page.locator(".who .badge")).to_have_text("admin")
    screenshot("overview")
    assert acme.org.memberships.count() == 2


def test_a_person_with_an_account_elsewhere_logs_in_and_joins_through_the_link(page: Page, live_server, screenshot):
    """Their password opens what they joined; the new organization waits for them to accept."""
    acme, globex = make_tenant("Acme"), make_tenant("Globex")
    person(globex, Role.VIEWER, email="dana@acme.example")
    out = io.StringIO()
    call_command("invite", org="acme", email="dana@acme.example", role="admin", base_url=live_server.url, stdout=out)
    link = json.loads(out.getvalue())["url"]
    log_in(page, live_server.url, "dana@acme.example")
    page.goto(link)
    join = page.get_by_role("button", name="Join Acme")
    expect(join).to_be_visible()
    screenshot("invitation-join")
    join.click()
    expect(page.get_by_text("Welcome to Acme.")).to_be_visible()
    expect(page.locator(".who .badge")).to_have_text("admin")
    assert acme.org.memberships.get(user__username="dana@acme.example").joined_at is not None


def test_log_in_and_out(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    admin = person(acme, Role.ADMIN)
    page.goto(f"{live_server.url}/console/members/")
    expect(page).to_have_url(f"{live_server.url}/console/login/?next=/console/members/")
    screenshot("login")
    log_in(page, None, admin.email)
    expect(page.get_by_role("heading", name="Members")).to_be_visible()  # back where they were going
    screenshot("members")
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_text("You are logged out.")).to_be_visible()
    page.goto(f"{live_server.url}/console/")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()


def test_wrong_passwords_are_throttled(page: Page, live_server, settings, screenshot):
    admin = person(make_tenant("Acme"), Role.ADMIN)
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(page, live_server.url, admin.email, "not the password")
        expect(page.get_by_text("Enter a correct email and password.")).to_be_visible()
    log_in(page, live_server.url, admin.email, "not the password")
    expect(page.get_by_role("heading", name="Too many failed logins")).to_be_visible()
    log_in(page, live_server.url, admin.email)  # even the right password waits out the cool-off
    expect(page.get_by_role("heading", name="Too many failed logins")).to_be_visible()
    screenshot("locked-out")


def test_a_privacy_policy_change_is_what_the_api_reads(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    log_in(page, live_server.url, person(acme, Role.ADMIN).email)
    go(page, "Policies")
    screenshot("policies")
    page.get_by_role("link", name="Privacy policy").click()
    page.get_by_label("Retention days").fill("0")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("retention_days must be a whole number from 1 to 3650, not 0.")).to_be_visible()
    screenshot("privacy-policy-bad-value")
    page.get_by_label("Retention days").fill("7")
    page.get_by_label("Training enabled").check()
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Privacy policy changed: training_enabled, retention_days.")).to_be_visible()
    screenshot("privacy-policy")
    policy = httpx.get(f"{live_server.url}/api/v1/privacy-policy", headers={"Authorization": f"Bearer {acme.key}"}).json()
    assert policy["retention_days"] == 7 and policy["training_enabled"] is True


def test_an_api_key_is_shown_once_works_and_is_refused_once_revoked(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    log_in(page, live_server.url, person(acme, Role.ADMIN).email)
    go(page, "API keys")
    page.get_by_label("Name").fill("ci pipeline")
    page.get_by_label("Role").select_option("viewer")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_text("it is shown only once")).to_be_visible()
    screenshot("api-key-created")
    key = page.locator("#new-key").inner_text().strip()
    organization = f"{live_server.url}/api/v1/organization"
    assert httpx.get(organization, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    page.get_by_role("link", name="Back to API keys").click()
    assert key not in page.content()
    screenshot("api-keys")
    page.get_by_role("row", name="ci pipeline").get_by_role("link", name="Revoke").click()
    page.get_by_role("button", name="Revoke key").click()
    expect(page.get_by_text("is revoked")).to_be_visible()
    assert httpx.get(organization, headers={"Authorization": f"Bearer {key}"}).status_code == 401


def test_a_viewer_sees_no_control_that_changes_anything_and_a_forged_post_is_refused(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    interaction = served(acme.org)
    log_in(page, live_server.url, person(acme, Role.VIEWER).email)
    for path in ("", "members/", "api-keys/", "policies/privacy/", "policies/reward-spec/", "interactions/",
                 f"interactions/{interaction.pk}/", "organization/"):
        page.goto(f"{live_server.url}/console/{path}")
        changing = page.locator("form[method=post]").filter(has_not=page.locator("#org-switcher")).filter(
            has_not=page.get_by_role("button", name="Log out"))
        expect(changing).to_have_count(0)
        for name in ("Save changes", "Create key", "Invite", "Revoke", "Remove", "Erase this interaction…", "New link"):
            expect(page.get_by_text(name, exact=True)).to_have_count(0)
    page.goto(f"{live_server.url}/console/members/")
    screenshot("viewer-members")
    status = page.evaluate("""async () => {
        const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
        const body = new URLSearchParams({csrfmiddlewaretoken: token, name: "forged", role: "viewer"});
        return (await fetch("/console/api-keys/", {method: "POST", body})).status;
    }""")
    assert status == 403
    assert not acme.org.api_keys.filter(name="forged").exists()


def test_an_admin_of_another_organization_gets_404_for_an_interaction(page: Page, live_server, screenshot):
    acme, globex = make_tenant("Acme"), make_tenant("Globex")
    interaction = served(acme.org)
    log_in(page, live_server.url, person(globex, Role.ADMIN).email)
    response = page.goto(f"{live_server.url}/console/interactions/{interaction.pk}/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    screenshot("not-found")


def test_the_organization_switcher_changes_organization_and_role(page: Page, live_server, screenshot):
    acme, globex = make_tenant("Acme"), make_tenant("Globex")
    both = person(acme, Role.VIEWER, email="both@corp.example")
    person(globex, Role.ADMIN, email="both@corp.example")
    log_in(page, live_server.url, both.email)
    go(page, "API keys")
    expect(page.get_by_role("button", name="Create key")).to_have_count(0)
    page.get_by_label("Organization").select_option(label="Globex (admin)")  # submits on change
    expect(page.get_by_role("heading", name="Globex")).to_be_visible()
    expect(page.locator(".who .badge")).to_have_text("admin")
    screenshot("switcher")
    go(page, "API keys")
    expect(page.get_by_role("button", name="Create key")).to_be_visible()


def test_interactions_filter_in_place(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    task = task_create(org=acme.org)
    for n in range(6):
        served(acme.org, adapter="acme@v2" if n % 2 else None, text=f"<edit>answer {n}</edit>", task=task if n == 3 else None,
               feedback=("edit_persisted",) if n % 3 else ("dissatisfied_followup",), latency_ms=120 + n)
    log_in(page, live_server.url, person(acme, Role.VIEWER).email)
    go(page, "Interactions")
    expect(page.locator("#interactions tbody tr")).to_have_count(6)
    screenshot("interactions")
    page.evaluate("window.notReloaded = true")
    page.get_by_label("Feedback").select_option("dissatisfied_followup")
    expect(page.locator("#interactions tbody tr")).to_have_count(2)
    expect(page).to_have_url(f"{live_server.url}/console/interactions/?served_by=&feedback=dissatisfied_followup&task=")
    assert page.evaluate("window.notReloaded") is True  # swapped in place by htmx, not a new page
    page.get_by_role("link").filter(has_text=":").first.click()
    expect(page.get_by_role("heading", name="Feedback")).to_be_visible()
    screenshot("interaction")


def test_pages_fit_a_narrow_window(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    for n in range(3):
        served(acme.org, adapter="acme@v1", text=f"<edit>a rather long completion number {n} " * 4 + "</edit>")
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server.url, person(acme, Role.ADMIN).email)
    for path, name in (("members/", "narrow-members"), ("interactions/", "narrow-interactions"), ("policies/canary/", "narrow-policy")):
        page.goto(f"{live_server.url}/console/{path}")
        screenshot(name)
        # Wide tables scroll inside their frame; the page itself never scrolls sideways.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path
        expect(page.get_by_role("navigation", name="Console")).to_be_visible()


def test_a_role_change_updates_the_members_list_in_place(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    viewer = person(acme, Role.VIEWER)
    log_in(page, live_server.url, person(acme, Role.OWNER, email="boss@acme.example").email)
    go(page, "Members")
    page.evaluate("window.notReloaded = true")
    row = page.get_by_role("row", name=viewer.email)
    row.get_by_label(f"Role of {viewer.email}").select_option("admin")
    row.get_by_role("button", name="Change role").click()
    expect(page.get_by_text(f"{viewer.email} is now admin.")).to_be_visible()
    expect(page.get_by_role("row", name=viewer.email).locator(".badge")).to_have_text("admin")
    assert page.evaluate("window.notReloaded") is True
    screenshot("members-role-changed")


def test_the_overview_plots_each_served_versions_hours(page: Page, live_server, screenshot, adapters_root, tmp_path):
    acme = make_tenant("Acme")
    version = registered_adapter(acme.org, tmp_path)  # the incumbent that served the later half
    deploy_switch(adapter=version, actor="test")  # routed as a promotion routes it: no replica to load it into here
    for n in range(8):
        served(acme.org, adapter=None if n < 4 else version.name, feedback=("edit_persisted",) if n % 2 else ("dissatisfied_followup",),
               latency_ms=100.0 + 10 * n)
    log_in(page, live_server.url, person(acme, Role.VIEWER).email)
    expect(page.locator(".charts[data-drawn=true]")).to_have_count(1)
    drawn = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll("figure[data-figure]")]
        .map((figure) => [figure.dataset.figure, figure.uplot?.data.slice(1)]))""")
    assert drawn["edit_persisted"] == [[50.0], [50.0]] and drawn["latency_ms"] == [[115.0], [155.0]]
    expect(page.locator("figure[data-figure=edit_persisted] canvas")).to_have_count(1)
    expect(page.locator("figure[data-figure=edit_persisted] .u-legend")).to_contain_text(version.name)
    screenshot("overview-plots")
    page.goto(f"{live_server.url}/console/adapters/")
    expect(page.get_by_role("row").filter(has_text=version.name).last).to_contain_text("50.0 %")
    screenshot("adapters-live")


def test_a_cycle_page_labels_small_values_apart_and_shows_why_its_canary_waits(page: Page, live_server, screenshot):
    acme = make_tenant("Acme")
    per_step = {"step": [1, 2, 3, 4], "loss": [0.5, 0.4, 0.3, 0.2], "kl": [0.0, 0.0004, 0.0008, 0.0012], "clip_fraction": [0.0] * 4}
    run = TrainingRun.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner",
                                     status=TrainingRun.Status.SUCCEEDED, report={"steps": 4, "per_step": per_step})
    latency = Moments(180, 500.0, 900.0)
    report = canary_decide(Arm(180, 110, 12, latency, 240, 3), Arm(170, 90, 11, latency, 230, 2), policy=CanaryPolicy(), out_of_time=False)
    cycle = Cycle.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner", training_run=run,
                                 status=Cycle.Status.CANARY, canary_report=report.as_dict())
    log_in(page, live_server.url, person(acme, Role.VIEWER).email)
    page.goto(f"{live_server.url}/console/cycles/{cycle.pk}/")
    expect(page.locator("#training-charts[data-drawn=true]")).to_have_count(1)
    labels = page.evaluate("document.querySelector('figure[data-figure=kl]').uplot.axes[1]._values")
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels  # uPlot's default read 0.0005 and 0.001 alike
    persisted = page.get_by_role("row").filter(has_text="edit_persisted_rate")
    expect(persisted).to_contain_text("undecided")
    expect(persisted).to_contain_text("better: ")
    expect(page.locator("table.canary-checks tr").filter(has_text="latency")).to_contain_text("worse: — / ")  # far on the other side
    screenshot("cycle-canary-waiting")
