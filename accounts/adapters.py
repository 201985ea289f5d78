from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.conf import settings


class AccountAdapter(DefaultAccountAdapter):
    def is_safe_url(self, url):
        """Also send people back to job endpoints on the wildcard domain after signing in."""
        host = urlsplit(url).hostname or ""
        domain = settings.ENDPOINT_WILDCARD_DOMAIN
        if domain and (host == domain or host.endswith(f".{domain}")):
            return True
        if settings.ENDPOINT_HOST and host == settings.ENDPOINT_HOST:
            return True
        return super().is_safe_url(url)

    def is_open_for_signup(self, request):
        return False  # local accounts are made by platform admins; people arrive through SSO


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin):
        return True  # who may do what comes from the group claims, applied at every login
