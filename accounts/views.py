"""The profile page and API: SSH public keys (mounted into jobs) and personal API tokens."""

from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.response import Response

from core.fields import ID_REGEX, NoUnknownFields

from .models import ApiToken, SSHKey, add_ssh_key


class SSHKeyForm(forms.ModelForm):
    class Meta:
        model = SSHKey
        fields = ["name", "public_key"]
        widgets = {"public_key": forms.Textarea(attrs={"rows": 3})}


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100)
    days = forms.IntegerField(min_value=1, max_value=365, initial=90, label="Expires in (days)")


NEW_TOKEN_SLOT = "new-api-token"  # noqa: S105  (a session key: where a new token waits)


def issue_token(user, name, days):
    return ApiToken.issue(user, name, timezone.now() + timedelta(days=days))


@never_cache  # shows a new token once: never from the browser's cache or history
@login_required
def profile(request):
    # Ids of their own: both forms have a name field.
    key_form = SSHKeyForm(request.POST if "add_key" in request.POST else None, auto_id="key_%s")
    token_form = TokenForm(request.POST if "add_token" in request.POST else None)
    if key_form.is_bound and key_form.is_valid():
        try:
            key = add_ssh_key(request.user, **key_form.cleaned_data)
        except ValidationError as exc:
            key_form.add_error("public_key", exc.message_dict["public_key"])
        else:
            messages.success(request, f"SSH key {key.name} added; new jobs mount it.")
            return redirect("profile")
    if token_form.is_bound and token_form.is_valid():
        _, raw = issue_token(
            request.user, token_form.cleaned_data["name"], token_form.cleaned_data["days"]
        )
        # Shown by the page the browser is sent to, once: reloading it (or the POST's page,
        # which the browser would send again) makes no second token.
        request.session[NEW_TOKEN_SLOT] = raw
        return redirect("profile")
    new_token = request.session.pop(NEW_TOKEN_SLOT, None)
    return render(
        request,
        "accounts/profile.html",
        {
            "key_form": key_form,
            "token_form": token_form,
            "new_token": new_token,
            "keys": request.user.ssh_keys.all(),
            "tokens": request.user.api_tokens.all(),
            "tokens_lapse": _tokens_lapse(request.user),
        },
    )


def _tokens_lapse(user):
    """When an SSO account's tokens stop working unless it signs in again (None otherwise)."""
    days = settings.SSO_TOKEN_SIGN_IN_DAYS
    if not days or not user.socialaccount_set.exists() or user.last_login is None:
        return None
    return user.last_login + timedelta(days=days)


@login_required
@require_POST
def delete_key(request, key_id):
    get_object_or_404(SSHKey, user=request.user, pk=key_id).delete()
    return redirect("profile")


@login_required
@require_POST
def revoke_token(request, token_id):
    ApiToken.objects.filter(user=request.user, pk=token_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    return redirect("profile")


class NotByToken(permissions.BasePermission):
    """New credentials come from a signed-in person, not from a token: a token, leaked or
    short-lived, would otherwise make a year-long one (outliving its own revocation) or add an
    SSH key every later job of its user mounts. Reading and revoking are allowed."""

    message = (
        "A token cannot make tokens or add SSH keys; sign in to the portal and do this from "
        "your profile page (or with a browser session)."
    )

    def has_permission(self, request, view):
        return request.method != "POST" or not isinstance(request.auth, ApiToken)


class SSHKeySerializer(NoUnknownFields, serializers.ModelSerializer):
    class Meta:
        model = SSHKey
        fields = ["id", "name", "public_key", "created_at"]


class SSHKeyViewSet(viewsets.ModelViewSet):
    """Your SSH public keys; jobs launched afterwards mount them read-only."""

    lookup_value_regex = ID_REGEX
    serializer_class = SSHKeySerializer
    permission_classes = [permissions.IsAuthenticated, NotByToken]
    http_method_names = ["get", "post", "delete", "head", "options"]

    def get_queryset(self):
        return SSHKey.objects.filter(user=self.request.user)

    def perform_create(self, serializer):
        serializer.instance = add_ssh_key(self.request.user, **serializer.validated_data)


class TokenSerializer(NoUnknownFields, serializers.ModelSerializer):
    days = serializers.IntegerField(write_only=True, min_value=1, max_value=365, default=90)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "key_id",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "days",
        ]
        read_only_fields = ["key_id", "created_at", "expires_at", "revoked_at", "last_used_at"]


class TokenViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your personal API tokens. The token itself is returned once, at creation; DELETE revokes."""

    lookup_value_regex = ID_REGEX
    serializer_class = TokenSerializer
    permission_classes = [permissions.IsAuthenticated, NotByToken]

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, raw = issue_token(
            request.user, serializer.validated_data["name"], serializer.validated_data["days"]
        )
        return Response(
            {**TokenSerializer(token).data, "token": raw}, status=status.HTTP_201_CREATED
        )

    def perform_destroy(self, token):  # revoked once: a second revoke keeps the first time
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
