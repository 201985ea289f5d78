import hmac

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions

from .models import TOKEN_PREFIX, ApiToken, hash_token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer gpp_<key id>_<secret>` with a personal API token."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        scheme, _, raw = header.partition(" ")
        if scheme != self.keyword or not raw.startswith(TOKEN_PREFIX):
            return None
        key_id = raw[len(TOKEN_PREFIX) :].split("_", 1)[0]
        token = ApiToken.objects.checked().filter(key_id=key_id).first()
        if token is None or not hmac.compare_digest(token.token_hash, hash_token(raw)):
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked API token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This token's user is inactive.")
        now = timezone.now()
        until = token.works_until()
        if until is not None and now >= until:  # its own expiry is filtered above
            raise exceptions.AuthenticationFailed(
                f"This account signs in through SSO: its API tokens work for "
                f"{settings.SSO_TOKEN_SIGN_IN_DAYS} days after a sign-in to the portal. Sign in "
                "to the portal in a browser, then retry with the same token."
            )
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword
