from django.urls import path

from . import views

app_name = "tenants"
urlpatterns = [
    path("tenants/", views.tenant_list, name="list"),
    path("tenants/new/", views.tenant_create, name="create"),
    path("tenants/<slug:slug>/", views.tenant_detail, name="detail"),
    path("tenants/<slug:slug>/edit/", views.tenant_edit, name="edit"),
    path("tenants/<slug:slug>/sync/", views.tenant_sync, name="sync"),
    path("tenants/<slug:slug>/archive/", views.tenant_archive, name="archive"),
    path("tenants/<slug:slug>/members/", views.member_add, name="member-add"),
    path(
        "tenants/<slug:slug>/members/<int:membership_id>/",
        views.member_update,
        name="member-update",
    ),
    path("audit/", views.audit_log, name="audit"),
]
