from __future__ import annotations

from django.contrib import admin
from django.urls import path

from registry import views

urlpatterns = [
    path("", views.catalog, name="catalog"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
