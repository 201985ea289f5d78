from django import forms
from django.contrib.auth import get_user_model

from core.edits import changed_boxes, sign_shown

from .choices import Role
from .constants import QUEUE_FIELDS, QUOTA_FIELDS
from .models import Tenant

SHOWN = "tenant-form-shown"
EDITABLE = ["display_name", *QUOTA_FIELDS, *QUEUE_FIELDS]


class TenantForm(forms.ModelForm):
    """Field validation only; invariants that need the cluster are checked by the service."""

    class Meta:
        model = Tenant
        fields = ["slug", "display_name", *QUOTA_FIELDS, *QUEUE_FIELDS]

    # The values the edit page showed, signed: what the admin changed is read against them,
    # not against the tenant as it is when the form comes back.
    shown = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["slug"].disabled = True
            self.fields["slug"].help_text = "The slug names cluster objects and cannot change."
            self.fields["shown"].initial = sign_shown(self._values(self.instance), SHOWN)

    def _values(self, tenant):
        return {name: getattr(tenant, name) for name in EDITABLE}

    def changes(self):
        """(the fields this admin changed from what the page showed them, to their new values;
        what the page showed of those): the service saves them only if nobody else changed
        them meanwhile, and leaves alone what another admin changed of the rest."""
        values = {name: self.cleaned_data.get(name) for name in EDITABLE}
        return changed_boxes(self.cleaned_data.get("shown"), values, SHOWN)


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
