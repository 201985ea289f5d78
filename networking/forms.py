from django import forms

from tenants.models import Tenant

from .models import POOL_FIELDS, IPPool


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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.initial["exclusions"] = "\n".join(self.instance.exclusions)

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
