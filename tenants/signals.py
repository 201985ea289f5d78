from allauth.account.signals import user_logged_in
from django.conf import settings
from django.dispatch import receiver

from .sso import apply_groups, groups_from_claims


@receiver(user_logged_in)
def map_sso_groups(sender, request, user, **kwargs):
    sociallogin = kwargs.get("sociallogin")
    if sociallogin is None:
        return
    groups = groups_from_claims(sociallogin.account.extra_data or {}, settings.SSO_GROUPS_CLAIM)
    apply_groups(user, groups)
