import base64
import binascii
import hashlib
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "gpp_"  # noqa: S105  (a prefix, not a secret)


def hash_token(raw):
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
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


def validate_ssh_public_key(value):
    parts = value.strip().split()
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
