from django.urls import path

from tenants.api import views

urlpatterns = [
    path("organization", views.OrganizationView.as_view()),
    path("privacy-policy", views.PrivacyPolicyView.as_view()),
    path("audit-log", views.AuditLogView.as_view()),
    path("members", views.MemberListView.as_view()),
    path("members/<uuid:member_id>", views.MemberView.as_view()),
    path("members/<uuid:member_id>/invitation", views.MemberInvitationView.as_view()),
    path("api-keys", views.ApiKeyListView.as_view()),
    path("api-keys/<uuid:key_id>", views.ApiKeyView.as_view()),
    path("interactions", views.InteractionListView.as_view()),
    path("interactions/<uuid:interaction_id>", views.InteractionView.as_view()),
    path("feedback", views.FeedbackView.as_view()),
    path("tasks", views.TaskListView.as_view()),
    path("tasks/<uuid:task_id>", views.TaskView.as_view()),
    path("tasks/<uuid:task_id>/outcome", views.TaskOutcomeView.as_view()),
    path("export", views.ExportView.as_view()),
]
