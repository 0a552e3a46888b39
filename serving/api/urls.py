from django.urls import path

from serving.api import views

urlpatterns = [
    path("adapters", views.AdapterListView.as_view()),
]
