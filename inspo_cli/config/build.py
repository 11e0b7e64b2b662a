"""A recipe's raw mapping (YAML merged with `--set` overrides) -> the typed section dataclasses of `Recipe`.

    recipe = build_section(Recipe, raw, prefix="", where=lambda key: f"recipes/demo.yaml: {key}")

Each value is checked against its field's type (bool, int, float, str, an optional or a list of them, or a nested
section) and converted where YAML's reading differs from the recipe's meaning (`1e3` for an int, `5e-7` read as a
string); `where(dotted_key)` says where a value came from, so every error is one line naming it.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import math
import types
import typing
from typing import Any

from inspo_cli.config.recipe_files import RecipeError
from inspo_cli.config.validation import ConfigValueError

INT_LIMIT = 2**63


def build_section(cls: type, raw: Any, prefix: str, where) -> Any:
    section = prefix.rstrip(".") or "the recipe"
    if not isinstance(raw, dict):
        raise RecipeError(f"{where(prefix.rstrip('.'))}: expected a mapping of keys for {section}, got {_show(raw)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = list(fields)
    kwargs = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            read_as = "" if isinstance(key, str) else f" (YAML read it as {type(key).__name__} {key!r})"
            raise RecipeError(
                f"{where(dotted)}: unknown key{read_as}{_suggest(str(key), names)}; valid keys in "
                f"{section}: {', '.join(names)}"
            )
        if isinstance(value, bool) and "yaml_bool" in fields[key].metadata:
            value = fields[key].metadata["yaml_bool"][value]  # YAML 1.1 reads a bare on/off as a boolean
        kwargs[key] = _coerce(value, hints[key], dotted, where)
    try:
        built = cls(**kwargs)
    except ConfigValueError as e:
        raise RecipeError(f"{where(prefix + e.field_name)}: {e.message}") from None
    for key, value in kwargs.items():  # after the fields' own checks, which name their ranges better
        if isinstance(value, int) and not isinstance(value, bool) and not -INT_LIMIT <= value < INT_LIMIT:
            raise RecipeError(
                f"{where(prefix + key)}: {_show(value)} does not fit a 64-bit integer (torch, numpy "
                "and TRL take no more); no setting needs that many, fix the value"
            )
    return built


def _coerce(value: Any, tp: Any, dotted: str, where) -> Any:
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build_section(tp, value, prefix=f"{dotted}.", where=where)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, dotted, where)
    if origin is list:
        items = value if isinstance(value, list) else [value]
        return [_coerce(item, args[0], f"{dotted}[{i}]", where) for i, item in enumerate(items)]
    try:
        converted = _SCALARS[tp](value)
    except (TypeError, ValueError):
        expected = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}[tp]
        hint = "quote it" if tp is str and isinstance(value, (datetime.date, bytes)) else "fix the value"
        raise RecipeError(f"{where(dotted)}: expected {expected}, got {_show(value)}; {hint}") from None
    return converted


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError
    if isinstance(value, int):
        return value
    number = float(value)  # accepts 1e3 and "1e3" (PyYAML reads 1e3 as a string)
    if not number.is_integer():
        raise ValueError
    return int(number)


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        raise TypeError
    number = float(value)  # PyYAML reads 5e-7 as a string; float() accepts it
    if not math.isfinite(number):  # .inf, .nan: no recipe field means anything by them (an .inf learning rate
        raise ValueError  # trained a model of NaNs)
    return number


def _to_str(value: Any) -> str:
    # A date reads back as the text written (2024-01-01); a timestamp does not (PyYAML converts it to UTC), and
    # !!set, !!binary and the like have no text of their own.
    if (
        isinstance(value, datetime.datetime)
        or not isinstance(value, (str, int, float, datetime.date))
        or isinstance(value, bool)
    ):
        raise TypeError
    return str(value)


_SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _show(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}... ({type(value).__name__})" if len(text) > 60 else f"{text} ({type(value).__name__})"


def _suggest(key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
