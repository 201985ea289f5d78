from django import forms
from django.contrib.auth import get_user_model

from .choices import Role
from .constants import QUEUE_FIELDS, QUOTA_FIELDS
from .models import Tenant


class TenantForm(forms.ModelForm):
    """Field validation only; invariants that need the cluster are checked by the service."""

    class Meta:
        model = Tenant
        fields = ["slug", "display_name", *QUOTA_FIELDS, *QUEUE_FIELDS]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["slug"].disabled = True
            self.fields["slug"].help_text = "The slug names cluster objects and cannot change."


class AddMemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.RESEARCHER)

    def clean_username(self):
        username = self.cleaned_data["username"]
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(
                f"No user '{username}'. People appear here after their first sign-in."
            )
        return user


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
