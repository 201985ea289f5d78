from django.conf import settings


def portal(request):
    return {"PORTAL_NAME": "GPU Portal", "PASSWORD_LOGIN": not settings.SOCIALACCOUNT_ONLY}
