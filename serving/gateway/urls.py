from django.urls import path

from serving.gateway import views

urlpatterns = [
    path("chat/completions", views.chat_completions),
]
