from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from .forward_auth import forget_session


@receiver(user_logged_out)
def end_endpoint_access(sender, request, user, **kwargs):
    """Signing out of the portal ends the endpoint cookies this browser's session opened."""
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        forget_session(session_key)
