from django.urls import path

from . import template_views, views

app_name = "jobs"
urlpatterns = [
    path("templates/", template_views.template_list, name="templates"),
    path("console/endpoints/", views.expiry_board, name="expiry"),
    path("endpoints/closed/", views.endpoint_closed, name="endpoint-closed"),
    path("templates/new/", template_views.template_edit, name="template-new"),
    path("templates/<int:template_id>/", template_views.template_edit, name="template"),
    path(
        "templates/<int:template_id>/retire/",
        template_views.template_retire,
        name="template-retire",
    ),
    path("tenants/<slug:slug>/jobs/", views.job_list, name="list"),
    path("tenants/<slug:slug>/jobs/launch/", views.launch, name="launch"),
    path("tenants/<slug:slug>/jobs/<slug:name>/", views.job_detail, name="detail"),
    path("tenants/<slug:slug>/jobs/<slug:name>/status/", views.job_status_partial, name="status"),
    path("tenants/<slug:slug>/jobs/<slug:name>/cancel/", views.job_cancel, name="cancel"),
    path("tenants/<slug:slug>/jobs/<slug:name>/logs/", views.job_logs, name="logs"),
    path("tenants/<slug:slug>/jobs/<slug:name>/logs/<slug:pod>/", views.pod_log, name="pod-log"),
    path("tenants/<slug:slug>/jobs/<slug:name>/relaunch/", views.job_relaunch, name="relaunch"),
    path("tenants/<slug:slug>/jobs/<slug:name>/delete/", views.job_delete, name="delete"),
    path(
        "tenants/<slug:slug>/jobs/<slug:name>/endpoints/<slug:endpoint>/extend/",
        views.endpoint_extend,
        name="endpoint-extend",
    ),
    path("tenants/<slug:slug>/volumes/", views.volume_list, name="volumes"),
    path("tenants/<slug:slug>/volumes/<int:volume_id>/", views.volume_action, name="volume-action"),
]
