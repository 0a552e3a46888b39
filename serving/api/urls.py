from django.urls import path

from serving.api import views

urlpatterns = [
    path("adapters", views.AdapterListView.as_view()),
    path("adapters/<str:name>/download", views.AdapterDownloadView.as_view()),
    path("adapters/<str:name>/promote", views.AdapterPromoteView.as_view()),
    path("adapters/<str:name>/rollback", views.AdapterRollbackView.as_view()),
    path("live-figures", views.LiveFiguresView.as_view()),
    path("alerts", views.AlertListView.as_view()),
    path("alerts/<uuid:alert_id>/acknowledge", views.AlertAcknowledgeView.as_view()),
    path("canary-policy", views.CanaryPolicyView.as_view()),
    path("gate-thresholds", views.GateThresholdsView.as_view()),
    path("traffic-limits", views.TrafficLimitsView.as_view()),
]
