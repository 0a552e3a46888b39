"""A policy's form, built from its RANGES table (tenants.ranges) like the API's validation and
schema: a checkbox for a bool, a list for choices, a number with its bounds, a number per key
for a table of weights. The policy's own service still validates what is sent; its errors are
put next to the fields they name."""

from django import forms

from tenants.ranges import PolicyError, Setting, settings_of


def _field(setting: Setting, label: str) -> forms.Field:
    described = {"label": label, "help_text": setting.help}
    if setting.kind is bool:
        return forms.BooleanField(required=False, **described)
    if setting.kind is str:
        return forms.ChoiceField(choices=[(c, c) for c in setting.choices], **described)
    bounds = {"min": f"{setting.low:g}", "max": f"{setting.high:g}"}
    if setting.kind is int:
        return forms.IntegerField(required=not setting.nullable, widget=forms.NumberInput(attrs=bounds), **described)
    return forms.FloatField(required=not setting.nullable, widget=forms.NumberInput(attrs={**bounds, "step": "any"}), **described)


class PolicyForm(forms.Form):
    """The settings of `policy_class`, with `values` (the policy as it is) as their initial values."""

    def __init__(self, policy_class: type, values: dict, data=None, *, disabled: bool = False):
        super().__init__(data)
        self.settings = settings_of(policy_class)
        self.current = values
        self.setting_errors: dict[str, list[str]] = {}
        for name, setting in self.settings.items():
            if setting.kind is dict:
                for key in setting.choices:
                    self.fields[f"{name}.{key}"] = _field(Setting(key, float, low=setting.low, high=setting.high), key)
                    self.initial[f"{name}.{key}"] = values[name].get(key)
            else:
                self.fields[name] = _field(setting, name.replace("_", " "))
                self.initial[name] = values[name]
        for field in self.fields.values():
            field.disabled = disabled

    def groups(self):
        """(setting, its fields, its range) in the policy's order: a table of weights is one group."""
        for name, setting in self.settings.items():
            fields = [self[f"{name}.{key}"] for key in setting.choices] if setting.kind is dict else [self[name]]
            errors = self.errors.get(name) if self.is_bound and name in self.fields else None
            bounds = f"from {setting.low:g} to {setting.high:g}" if setting.low is not None else ""
            yield {"name": name, "setting": setting, "kind": setting.kind.__name__, "fields": fields, "bounds": bounds,
                   "errors": errors or self.setting_errors.get(name)}

    def changes(self) -> dict:
        """The settings whose submitted value differs from the policy's (a table's changed keys)."""
        changes = {}
        for name, setting in self.settings.items():
            if setting.kind is dict:
                changed = {key: self.cleaned_data[f"{name}.{key}"] for key in setting.choices
                           if self.cleaned_data[f"{name}.{key}"] != self.current[name].get(key)}
                if changed:
                    changes[name] = changed
            elif self.cleaned_data[name] != self.current[name]:
                changes[name] = self.cleaned_data[name]
        return changes

    def refused(self, error: PolicyError) -> None:
        """The service's verdict, next to the fields it names."""
        for name, problem in (error.details or {}).items():
            if name in self.fields:
                self.add_error(name, problem)
            elif name in self.settings:  # a table of weights
                self.setting_errors[name] = [problem]
            else:
                self.add_error(None, problem)
