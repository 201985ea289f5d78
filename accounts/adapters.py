import unicodedata

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.utils import user_username
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialAccount


class AccountAdapter(DefaultAccountAdapter):
    """After sign-in people go back to the portal only (allauth's own check); a job endpoint
    is reached through the portal's endpoint handshake, never through `next`."""

    def is_open_for_signup(self, request):
        return False  # local accounts are made by platform admins; people arrive through SSO

    def authenticate(self, request, **credentials):
        """Who signs in through the identity provider signs in there alone: a local password
        (set before the portal stopped offering one) would go past its MFA, its disabling of
        the person and its groups. Refused as any wrong password is."""
        user = super().authenticate(request, **credentials)
        if user is not None and SocialAccount.objects.filter(user=user).exists():
            return None
        return user

    def _get_login_attempts_cache_key(self, request, **credentials):
        """Failed sign-ins counted per account name, as the database compares names: allauth
        keys them by the request's Host header too, which a client sets (`:1`, `:2`, upper
        case: a fresh count each)."""
        login = str(credentials.get("username", ""))
        return f"login:{unicodedata.normalize('NFKC', login).casefold()}"


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin):
        return True  # who may do what comes from the group claims, applied at every login

    def populate_user(self, request, sociallogin, data):
        """The provider's user name in Unicode's compatibility form (NFKC), as Django keeps
        names made in its forms: a fullwidth `ａlice` is `alice`, and meets the `alice` there
        is (which gives the newcomer another name) instead of living beside it, alike to read."""
        user = super().populate_user(request, sociallogin, data)
        name = user_username(user)
        if name:
            user_username(user, unicodedata.normalize("NFKC", name))
        return user
