from django.urls import path

from training.api import views

urlpatterns = [
    path("reward-spec", views.RewardSpecView.as_view()),
    path("training-schedule", views.TrainingScheduleView.as_view()),
    path("training-runs", views.TrainingRunListView.as_view()),
    path("training-runs/<uuid:run_id>", views.TrainingRunView.as_view()),
    path("cycles", views.CycleListView.as_view()),
    path("cycles/<uuid:cycle_id>", views.CycleView.as_view()),
]
