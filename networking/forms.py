from django import forms

from core.edits import changed_boxes, sign_shown
from tenants.models import Tenant

from .models import POOL_FIELDS, IPPool
from .services import EDITABLE, shown_values

SHOWN = "pool-form-shown"


class PoolForm(forms.ModelForm):
    exclusions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line: 10.0.0.5, 10.0.0.10-10.0.0.20 or 10.0.0.16/28 (or IPv6).",
    )
    tenants = forms.ModelMultipleChoiceField(
        queryset=Tenant.objects.active(), required=False, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = IPPool
        fields = [
            *POOL_FIELDS,
            "tenants",
        ]

    # The values the edit page showed, signed: what the admin changed is read against them,
    # not against the pool as it is when the form comes back (as the tenant form).
    shown = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.initial["exclusions"] = "\n".join(self.instance.exclusions)
            self.fields["shown"].initial = sign_shown(shown_values(self.instance), SHOWN)
            # Its tenants as they are, archived ones too: offered only the active ones, a save
            # would take the rest off the pool unasked.
            current = Tenant.objects.filter(ip_pools=self.instance)
            self.fields["tenants"].queryset = (Tenant.objects.active() | current).distinct()

    def changes(self):
        """(the fields this admin changed from what the page showed them, to their new values;
        what the page showed of those): the service saves them only if nobody else changed
        them meanwhile, and leaves alone what another admin changed of the rest."""
        values = {name: self.cleaned_data.get(name) for name in EDITABLE}
        values["tenants"] = sorted(t.slug for t in values["tenants"] or ())
        changes, seen = changed_boxes(self.cleaned_data.get("shown"), values, SHOWN)
        if "tenants" in changes:  # the service takes the tenants themselves
            changes["tenants"] = list(self.cleaned_data["tenants"])
        return changes, seen

    def clean_exclusions(self):
        return [
            line.strip() for line in self.cleaned_data["exclusions"].splitlines() if line.strip()
        ]


class ReserveForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none())
    username = forms.CharField(max_length=150)
    address = forms.GenericIPAddressField(
        required=False, help_text="Empty: the first free address."
    )
    pinned = forms.BooleanField(required=False, initial=True)
    note = forms.CharField(required=False, max_length=200)

    def __init__(self, *args, pool, **kwargs):
        super().__init__(*args, **kwargs)
        # As the API: an archived tenant runs no jobs, and gets no new addresses.
        self.fields["tenant"].queryset = Tenant.objects.active().filter(ip_pools=pool)
