"""The checks every recipe section runs in `__post_init__`; a failure is a `ConfigValueError(field, message)`, which
the loader prefixes with the file and the section. `choice_field` declares a field of fixed choices once: its help
lists them and `check_choices` refuses anything else, from the same tuple."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from inspo_cli.registry import Registry, is_import_path


class ConfigValueError(ValueError):
    """A field holds a value of the right type that is still invalid."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field_name = field_name
        self.message = message


def _require(condition: bool, field_name: str, message: str) -> None:
    if not condition:
        raise ConfigValueError(field_name, message)


def _one_of(value: str, choices: tuple[str, ...], field_name: str) -> None:
    _require(value in choices, field_name, f"must be one of {', '.join(choices)} (got {value!r:.100})")


def _positive(value: float | int | None, field_name: str, example: str) -> None:
    if value is not None:
        _require(value > 0, field_name, f"must be > 0 (got {value!r}); use e.g. {example}")


def _fraction(value: float, field_name: str, *, closed: bool = True) -> None:
    ok = 0 <= value <= 1 if closed else 0 < value <= 1
    _require(ok, field_name, f"must be in {'[0, 1]' if closed else '(0, 1]'} (got {value!r})")


def _registered(value: str, registry: Registry, field_name: str) -> None:
    """`value` names a strategy of `registry`, or (where allowed) an import path that imports to a callable."""
    try:
        registry.resolve(value)
    except ValueError as error:
        own = registry.import_paths and is_import_path(value)
        raise ConfigValueError(field_name, str(error) if own else registry.unknown(value)) from None


def choice_field(choices: Mapping[str, str] | Sequence[str], default: str, help: str, **metadata: Any) -> Any:
    """A str field holding one of `choices` (names, or name -> what it means): "{choices}" in `help` becomes
    "a (what a means) | b | c", and the names go to the field's metadata["choices"], which `check_choices` tests, so
    the help cannot offer a value the check refuses. `metadata`: the field's other entries (`yaml_bool`)."""
    meanings = dict(choices) if isinstance(choices, Mapping) else dict.fromkeys(choices, "")
    if default not in meanings or "{choices}" not in help:
        raise ValueError(f"choice_field: the default {default!r} must be a choice, and the help must say {{choices}}")
    shown = " | ".join(f"{name} ({meaning})" if meaning else name for name, meaning in meanings.items())
    return dataclasses.field(
        default=default, metadata={**metadata, "help": help.replace("{choices}", shown), "choices": tuple(meanings)}
    )


def choices(section: type, name: str) -> tuple[str, ...]:
    """The choices of a `choice_field`: `choices(TrainingConfig, "scale_rewards")` -> ("group", "batch", "none")."""
    return next(f for f in dataclasses.fields(section) if f.name == name).metadata["choices"]


def check_choices(section: Any) -> None:
    """Refuse, field by field in declaration order, a value outside its `choice_field`'s choices."""
    for f in dataclasses.fields(section):
        if "choices" in f.metadata:
            _one_of(getattr(section, f.name), f.metadata["choices"], f.name)
