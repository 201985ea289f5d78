from allauth.account.adapter import DefaultAccountAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter


class AccountAdapter(DefaultAccountAdapter):
    """After sign-in people go back to the portal only (allauth's own check); a job endpoint
    is reached through the portal's endpoint handshake, never through `next`."""

    def is_open_for_signup(self, request):
        return False  # local accounts are made by platform admins; people arrive through SSO


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin):
        return True  # who may do what comes from the group claims, applied at every login
