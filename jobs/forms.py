import shlex

from django import forms
from django.core.exceptions import ValidationError

from . import spec as specs
from .models import DataVolume
from .spec import OVERRIDABLE


class CommandField(forms.CharField):
    """A command line as typed: browsers send a textarea's line breaks as CRLF, which would
    reach the container as a stray '\\r' inside a quoted script."""

    def to_python(self, value):
        return super().to_python(value).replace("\r\n", "\n").replace("\r", "\n")


class LaunchForm(forms.Form):
    """A launch from one template version: the fields it lets the user override."""

    name = forms.CharField(
        required=False,
        max_length=48,
        help_text="Optional; generated from the template name when empty.",
    )
    image = forms.CharField(required=False, max_length=300)
    command = CommandField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One command line, split like a shell would.",
    )
    gpus = forms.IntegerField(required=False, min_value=0, max_value=64, label="GPUs per replica")
    workspace_gib = forms.IntegerField(
        required=False, min_value=1, max_value=100_000, label="Workspace disk (GiB)"
    )
    data_volume = forms.ModelChoiceField(
        queryset=DataVolume.objects.none(),
        required=False,
        help_text="A data disk that outlives the job.",
    )

    def __init__(self, *args, version, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.version = version
        spec = version.spec
        allowed = set(version.overridable)
        self.fields["image"].initial = spec.get("image")
        command = spec.get("command") or []
        # shlex.join quotes so that splitting the text again gives back the same argv
        self.fields["command"].initial = (
            shlex.join(command) if isinstance(command, list) else command
        )
        # One number for every GPU task: shown when they share it; else the box is empty (its
        # placeholder says each task's), so a number typed in is an override even if it is one
        # of theirs.
        counts = {t["name"]: t["gpus"] for t in spec["tasks"] if t.get("gpus")}
        shared = set(counts.values())
        self.fields["gpus"].initial = shared.pop() if len(shared) == 1 else (None if counts else 0)
        if len(shared) > 1:
            each = ", ".join(f"{name} {n}" for name, n in counts.items())
            self.fields["gpus"].widget.attrs["placeholder"] = f"empty: template's ({each})"
        self.fields["workspace_gib"].initial = (spec.get("volumes") or {}).get("workspace_gib", 50)
        self.fields["data_volume"].queryset = DataVolume.objects.filter(
            tenant=tenant, delete_requested=False
        )
        for task in spec["tasks"]:
            field = forms.IntegerField(
                min_value=1,
                max_value=1000,
                initial=task.get("replicas", 1),
                label=f"Replicas of task {task['name']}",
                required=False,
            )
            field.disabled = "replicas" not in allowed
            self.fields[f"replicas_{task['name']}"] = field
        for name in OVERRIDABLE:
            if name in self.fields:
                self.fields[name].disabled = name not in allowed
        # Left empty, a field takes the template's value: the empty box says which.
        for name, field in self.fields.items():
            if field.initial not in (None, "") and (name in OVERRIDABLE or "replicas" in name):
                field.widget.attrs.setdefault("placeholder", f"empty: template {field.initial}")

    def overrides(self):
        """What the user changed from the template's values shown: a form sent back as shown
        launches the template as it is (its GPU box shows the first GPU task's count, which an
        override would give every GPU task)."""
        data, changed = self.cleaned_data, set(self.changed_data)
        overrides = {}
        for key in ("image", "gpus", "workspace_gib", "command"):
            value = data.get(key)
            if key in self.version.overridable and key in changed and value not in (None, ""):
                overrides[key] = value
        if "replicas" in self.version.overridable:
            replicas = {
                t["name"]: data[f"replicas_{t['name']}"]
                for t in self.version.spec["tasks"]
                if f"replicas_{t['name']}" in changed and data.get(f"replicas_{t['name']}")
            }
            if replicas:
                overrides["replicas"] = replicas
        return overrides


class TemplateForm(forms.Form):
    name = forms.CharField(max_length=50)
    description = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )
    spec = forms.CharField(
        max_length=specs.MAX_SOURCE_CHARS,
        strip=False,  # kept as written
        widget=forms.Textarea(
            attrs={"rows": 24, "spellcheck": "false", "class": "code", "wrap": "off"}
        ),
        help_text="YAML: image, command, tasks, expose, volumes, ...",
    )
    overridable = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=[(k, k) for k in OVERRIDABLE],
    )

    def clean_spec(self):
        try:
            return specs.from_yaml(self.cleaned_data["spec"])
        except ValidationError as exc:
            raise forms.ValidationError(
                [
                    message if path == "spec" else f"{path}: {message}"
                    for path, messages in exc.message_dict.items()
                    for message in messages
                ]
            ) from exc


class DataVolumeForm(forms.Form):
    name = forms.CharField(max_length=63)
    size_gib = forms.IntegerField(min_value=1, max_value=100_000, label="Size (GiB)")
    storage_class = forms.CharField(required=False, max_length=253)
