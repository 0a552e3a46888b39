from django.urls import path

from training.api import views

urlpatterns = [
    path("reward-spec", views.RewardSpecView.as_view()),
]
