"""The console's pages, under /console/. Every page but the way in (login, invitations) is a
`console.access.Page`: tests/console/test_pages.py enumerates these patterns, so a new page
is checked for login, roles, foreign ids and CSRF without a test of its own."""

from django.urls import path

from console.views import data, loop, people, policies, session

app_name = "console"

urlpatterns = [
    path("login/", session.Login.as_view(), name="login"),
    path("logout/", session.Logout.as_view(), name="logout"),
    path("invitations/<str:token>/", session.InvitationAccept.as_view(), name="invitation"),
    path("switch/", session.SwitchOrganization.as_view(), name="switch"),
    path("", data.Overview.as_view(), name="home"),
    path("charts/quality.json", data.QualityChart.as_view(), name="chart-quality"),
    path("members/", people.Members.as_view(), name="members"),
    path("members/<uuid:member_id>/role/", people.MemberRole.as_view(), name="member-role"),
    path("members/<uuid:member_id>/invitation/", people.MemberInvitation.as_view(), name="member-invitation"),
    path("members/<uuid:member_id>/remove/", people.MemberRemove.as_view(), name="member-remove"),
    path("api-keys/", people.ApiKeys.as_view(), name="api-keys"),
    path("api-keys/<uuid:key_id>/revoke/", people.ApiKeyRevoke.as_view(), name="api-key-revoke"),
    path("policies/", policies.Index.as_view(), name="policies"),
    path("policies/reward-spec/versions/", policies.RewardSpecVersions.as_view(), name="reward-spec-versions"),
    path("policies/<slug:policy>/", policies.PolicyPage.as_view(), name="policy"),
    path("cycles/", loop.Cycles.as_view(), name="cycles"),
    path("cycles/<uuid:cycle_id>/", loop.CycleDetail.as_view(), name="cycle"),
    path("cycles/<uuid:cycle_id>/training.json", loop.CycleTrainingChart.as_view(), name="chart-training"),
    path("adapters/", loop.Adapters.as_view(), name="adapters"),
    path("adapters/<str:name>/download/", loop.AdapterDownload.as_view(), name="adapter-download"),
    path("adapters/<str:name>/promote/", loop.AdapterPromote.as_view(), name="adapter-promote"),
    path("adapters/<str:name>/rollback/", loop.AdapterRollback.as_view(), name="adapter-rollback"),
    path("alerts/", loop.Alerts.as_view(), name="alerts"),
    path("alerts/<uuid:alert_id>/acknowledge/", loop.AlertAcknowledge.as_view(), name="alert-acknowledge"),
    path("interactions/", data.Interactions.as_view(), name="interactions"),
    path("interactions/<uuid:interaction_id>/", data.InteractionDetail.as_view(), name="interaction"),
    path("interactions/<uuid:interaction_id>/erase/", data.InteractionErase.as_view(), name="interaction-erase"),
    path("tasks/", data.Tasks.as_view(), name="tasks"),
    path("tasks/<uuid:task_id>/", data.TaskDetail.as_view(), name="task"),
    path("audit-log/", data.AuditLog.as_view(), name="audit-log"),
    path("organization/", data.OrganizationSettings.as_view(), name="organization"),
]
