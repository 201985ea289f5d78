import base64
import binascii
import hashlib
import secrets
from datetime import timedelta

from allauth.socialaccount.models import SocialAccount
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

TOKEN_PREFIX = "gpp_"  # noqa: S105  (a prefix, not a secret)


def hash_token(raw):
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def checked(self):
        """Usable tokens with their user and whether it signs in through SSO, read in the one
        query every API request and endpoint makes (see `works_until`)."""
        sso = SocialAccount.objects.filter(user_id=models.OuterRef("user_id"))
        return self.usable().select_related("user").annotate(sso=models.Exists(sso))

    def usable(self):
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiToken(models.Model):
    """A personal API token. Only its hash is stored; the token is shown once at creation."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_id = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        db_table = "portal_apitoken"  # created when this lived in the portal app

    def __str__(self):
        return f"{self.name} ({self.key_id})"

    def works_until(self):
        """When it stops working, or None: its expiry and, for an account that signs in through
        SSO, SSO_TOKEN_SIGN_IN_DAYS after its last sign-in. The provider's groups (platform
        admin, tenants) and its disabling of the person reach the portal only at a sign-in; a
        token must not carry what the provider took away for the rest of its year."""
        limits = [self.expires_at]
        days = settings.SSO_TOKEN_SIGN_IN_DAYS
        sso = getattr(self, "sso", None)  # read with it by `checked()`
        if sso is None:
            sso = self.user.socialaccount_set.exists()
        if days and sso:
            signed_in = self.user.last_login or self.created_at
            limits.append(signed_in + timedelta(days=days))
        return min((t for t in limits if t is not None), default=None)

    @classmethod
    def issue(cls, user, name, expires_at=None):
        """Create a token; returns (token, raw secret to show once)."""
        key_id = secrets.token_hex(6)
        raw = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        token = cls.objects.create(
            user=user, name=name, key_id=key_id, token_hash=hash_token(raw), expires_at=expires_at
        )
        return token, raw


SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


# A 16384-bit RSA key's line is under 3,000 characters; jobs get every key of their owner in
# one Secret (at most 1 MiB), so a user's keys are bounded in size and number.
MAX_SSH_KEY_LENGTH = 8192
MAX_SSH_KEYS = 20


def validate_ssh_public_key(value):
    text = value.strip()
    if len(text) > MAX_SSH_KEY_LENGTH:
        raise ValidationError(
            f"A public key is one line of at most {MAX_SSH_KEY_LENGTH} characters (this has "
            f"{len(text)}); paste the .pub file's line.",
            code="invalid_ssh_key",
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValidationError(
            "Paste the key as one line (the .pub file), with no line breaks or control characters.",
            code="invalid_ssh_key",
        )
    parts = text.split()
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES:
        raise ValidationError(
            "Paste an OpenSSH public key such as 'ssh-ed25519 AAAA... you@host' "
            "(the .pub file, never the private key).",
            code="invalid_ssh_key",
        )
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValidationError("The key's base64 part is damaged.", code="invalid_ssh_key") from exc
    if not blob[4 : 4 + len(parts[0])] == parts[0].encode():
        raise ValidationError("The key's type does not match its contents.", code="invalid_ssh_key")
    try:
        load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ValidationError(
            "The key is incomplete or damaged: paste the whole line of the .pub file.",
            code="invalid_ssh_key",
        ) from exc


class SSHKey(models.Model):
    """A user's SSH public key, mounted read-only into their jobs."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys"
    )
    name = models.CharField(max_length=100)
    public_key = models.TextField(validators=[validate_ssh_public_key])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        db_table = "portal_sshkey"  # created when this lived in the portal app

    def __str__(self):
        return self.name

    @property
    def fingerprint(self):
        """As `ssh-keygen -l` shows it: SHA256 of the key, in unpadded base64."""
        digest = hashlib.sha256(base64.b64decode(self.public_key.split()[1])).digest()
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


@transaction.atomic
def add_ssh_key(user, name, public_key):
    """Add a key to the user's, within the bound on their number (keys added at once take turns
    on the user's row)."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    blob = public_key.split()[1]
    for other in SSHKey.objects.filter(user=user):
        if other.public_key.split()[1] == blob:
            raise ValidationError({"public_key": f"You added this key already, as '{other.name}'."})
    if SSHKey.objects.filter(user=user).count() >= MAX_SSH_KEYS:
        raise ValidationError(
            {
                "public_key": (
                    f"You have {MAX_SSH_KEYS} keys, the most one may have; delete one first."
                )
            }
        )
    return SSHKey.objects.create(user=user, name=name, public_key=public_key.strip())
