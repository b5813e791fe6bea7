"""Strict, typed overrides for nested frozen dataclasses.

Used by `moozi.config` for `--set key=value`, config files and presets: every
key must name an existing field, every value must parse as the field's type,
and an error names the bad key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import types
import typing
from typing import Any, Mapping

from moozi.errors import MooziError


class ConfigError(MooziError):
    """A config key or value is not allowed (the message says which and why)."""


def _field_map(cls_or_obj) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls_or_obj)}


def _closest(name: str, options) -> str:
    matches = difflib.get_close_matches(name, list(options), n=3, cutoff=0.5)
    return f" (did you mean {', '.join(matches)}?)" if matches else ""


def _allowed_description(tp) -> str:
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(m.value for m in tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_allowed_description(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "none"
    if origin in (tuple, list):
        return "a comma-separated list"
    return getattr(tp, "__name__", str(tp))


_BAD = object()  # a parser's answer to a value it cannot read as its type


def parse_value(raw: Any, tp, key: str) -> Any:
    """Converts `raw` (a string from the command line, or a TOML/JSON value) to type `tp`.

    Raises ConfigError naming `key` and what `tp` allows when `raw` is not one of them.
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        value = _parse_optional_or_union(raw, typing.get_args(tp), key)
    elif origin is typing.Literal:
        value = next((option for option in typing.get_args(tp) if raw == option or (isinstance(raw, str) and str(option) == raw)), _BAD)
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        value = _parse_enum(raw, tp)
    elif origin in (tuple, list):
        value = _parse_sequence(raw, tp, key)
    elif tp is typing.Any:
        value = raw
    else:
        parser = {bool: _parse_bool, int: _parse_int, float: _parse_float, str: _parse_str}.get(tp)
        value = parser(raw, key) if parser is not None else _BAD
    if value is _BAD:
        raise ConfigError(f"bad value {raw!r} for {key}: expected {_allowed_description(tp)}")
    return value


def _parse_optional_or_union(raw, args, key: str):
    if type(None) in args and (raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null", ""))):
        return None
    for arg in args:
        if arg is type(None):
            continue
        try:
            return parse_value(raw, arg, key)
        except ConfigError:
            continue
    return _BAD


def _parse_enum(raw, tp):
    if isinstance(raw, tp):
        return raw
    for member in tp:
        if raw in (member.value, member.name) or (isinstance(raw, str) and raw.lower() == member.value):
            return member
    return _BAD


def _parse_bool(raw, key: str):
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(raw, str) and raw.lower() in ("false", "0", "no", "off"):
        return False
    return _BAD


def _parse_int(raw, key: str):
    if isinstance(raw, bool):
        return _BAD
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                return _BAD
            if value.is_integer():
                return int(value)
    return _BAD


def _parse_float(raw, key: str):
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return _BAD
    try:
        value = float(raw)
    except (ValueError, OverflowError):  # OverflowError: a JSON integer beyond any float
        return _BAD
    if value != value:
        # NaN compares false with everything, so it would pass every range check silently
        # (train.checkpoint_every_minutes=nan would mean no periodic checkpoint at all).
        raise ConfigError(f"bad value {raw!r} for {key}: expected a number, not NaN")
    return value


def _parse_str(raw, key: str):
    return raw if isinstance(raw, str) else _BAD


def _parse_sequence(raw, tp, key: str):
    """A comma-separated string or a list -> a tuple of `tp`'s item type (blank items dropped)."""
    (item_tp, *_) = typing.get_args(tp) or (str,)
    items = raw.split(",") if isinstance(raw, str) else list(raw) if isinstance(raw, (list, tuple)) else None
    if items is None:
        return _BAD
    items = [i.strip() if isinstance(i, str) else i for i in items if not (isinstance(i, str) and not i.strip())]
    return tuple(parse_value(i, item_tp, key) for i in items)


def _resolved_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def apply_overrides(config, overrides: Mapping[str, Any], *, prefix: str = ""):
    """Returns a copy of `config` with dotted-key overrides applied (e.g. {"planner.num_simulations": "50"})."""
    nested: dict[str, dict[str, Any]] = {}
    direct: dict[str, Any] = {}
    fields = _field_map(config)
    hints = _resolved_types(type(config))
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        full = prefix + head
        if head not in fields:
            raise ConfigError(
                f"unknown config key {full!r}{_closest(head, fields)}; "
                f"allowed keys here: {', '.join(sorted(fields))}"
            )
        sub = getattr(config, head)
        if rest:
            if not dataclasses.is_dataclass(sub):
                raise ConfigError(f"config key {full!r} is a value, not a section; cannot set {prefix + key!r}")
            nested.setdefault(head, {})[rest] = value
        elif dataclasses.is_dataclass(sub):
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"config key {full!r} is a section; set one of its fields, e.g. "
                    f"{full}.{next(iter(_field_map(sub)))}=..."
                )
            for sub_key, sub_value in value.items():
                nested.setdefault(head, {})[sub_key] = sub_value
        else:
            direct[head] = parse_value(value, hints[head], full)
    for head, sub_overrides in nested.items():
        direct[head] = apply_overrides(getattr(config, head), sub_overrides, prefix=f"{prefix}{head}.")
    if not direct:
        return config
    try:
        return dataclasses.replace(config, **direct)
    except (ValueError, TypeError) as e:
        # A section's own check (e.g. Support: max_value > min_value) refused the combination.
        keys = ", ".join(prefix + head for head in direct)
        raise ConfigError(f"invalid value for {keys}: {e}") from None


def flatten_overrides(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"planner": {"num_simulations": 50}} -> {"planner.num_simulations": 50}."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(flatten_overrides(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def to_dict(config) -> dict[str, Any]:
    """A JSON/TOML-friendly nested dict (enums by value, tuples as lists)."""

    def convert(value):
        if dataclasses.is_dataclass(value):
            return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, (tuple, list)):
            return [convert(v) for v in value]
        return value

    return convert(config)


def from_dict(cls, data: Mapping[str, Any]):
    """Builds `cls` from its defaults plus a nested dict (as written by `to_dict`)."""
    return apply_overrides(cls(), flatten_overrides(data))


def parse_set_arguments(items) -> dict[str, str]:
    """["a.b=1", "c=x"] -> {"a.b": "1", "c": "x"}, with a clear error for malformed items."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad --set {item!r}: expected key=value, e.g. planner.num_simulations=50")
        out[key.strip()] = value.strip()
    return out
