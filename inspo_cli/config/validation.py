"""The checks every recipe section runs in `__post_init__`; a failure is a `ConfigValueError(field, message)`, which
the loader prefixes with the file and the section."""

from __future__ import annotations

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
