from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from accounts import views as profile
from jobs import api as jobs_api
from jobs import forward_auth
from networking import api as networking_api
from tenants import api as tenants_api
from tenants import views as tenants_views

from . import console, errors, health

# Django's admin signs in through the portal's sign-in (its rate limits, SSO, PASSWORD_LOGIN).
admin.site.login = secure_admin_login(admin.site.login)

router = DefaultRouter()
router.register("tenants", tenants_api.TenantViewSet, basename="tenant")
router.register(
    r"tenants/(?P<tenant_slug>[-a-z0-9]+)/members",
    tenants_api.MembershipViewSet,
    basename="membership",
)
router.register("audit-events", tenants_api.AuditEventViewSet, basename="audit-event")
router.register(r"tenants/(?P<tenant_slug>[-a-z0-9]+)/jobs", jobs_api.JobViewSet, basename="job")
router.register(
    r"tenants/(?P<tenant_slug>[-a-z0-9]+)/volumes",
    jobs_api.DataVolumeViewSet,
    basename="data-volume",
)
router.register("templates", jobs_api.TemplateViewSet, basename="template")
router.register("endpoints", jobs_api.EndpointBoardViewSet, basename="endpoint")
router.register("ip-pools", networking_api.PoolViewSet, basename="ip-pool")
router.register("me/ssh-keys", profile.SSHKeyViewSet, basename="ssh-key")
router.register("me/tokens", profile.TokenViewSet, basename="token")

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("auth/endpoint/<int:endpoint_id>", forward_auth.forward_auth, name="forward-auth"),
    path(
        "auth/endpoint/<int:endpoint_id>/start",
        forward_auth.start,
        name="endpoint-start",
    ),
    path("readyz", health.readyz, name="readyz"),
    path("", tenants_views.home, name="home"),
    path("", include("tenants.urls")),
    path("", include("jobs.urls")),
    path("", include("networking.urls")),
    path("profile/", profile.profile, name="profile"),
    path("console/", console.console, name="console"),
    path("capacity/", console.capacity, name="capacity"),
    path("api/v1/cluster/", console.ClusterView.as_view(), name="api-cluster"),
    path("api/v1/cluster/capacity/", console.CapacityView.as_view(), name="api-capacity"),
    path("profile/keys/<int:key_id>/delete/", profile.delete_key, name="profile-key-delete"),
    path(
        "profile/tokens/<int:token_id>/revoke/", profile.revoke_token, name="profile-token-revoke"
    ),
    # allauth's pages the portal does not offer: a password for an SSO user (it would outlive
    # the identity provider's say: its MFA, its disabling of the person, its groups), password
    # reset and e-mail addresses (the portal sends no mail; the address job apps are told is
    # the identity provider's), codes by mail or phone, and linking other accounts.
    re_path(
        r"^accounts/(password/(set|reset)/|email/|confirm-email/|3rdparty/$|login/code/|phone/)",
        errors.not_offered,
    ),
    path("accounts/", include("allauth.urls")),
    path("api/v1/", include(router.urls)),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("django-admin/", admin.site.urls),
]

handler404 = "portal.errors.not_found"
