from django.conf import settings


def portal(request):
    return {
        "PORTAL_NAME": "GPU Portal",
        "PASSWORD_LOGIN": not settings.SOCIALACCOUNT_ONLY,
        "PORTAL_ADMIN_CONTACT": settings.PORTAL_ADMIN_CONTACT,
    }
