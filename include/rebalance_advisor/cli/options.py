"""CLI options generated from the parameter models (:mod:`rebalance_advisor.domain.parameters`).

A field with ``cli="--flag"`` becomes that option, ``cli="name"`` a positional argument. Each value
is checked against the field's type and bounds while argparse parses (argparse names the option in
its error line); :func:`params_from` then builds the model, which also applies its cross-field and
regex checks (a bad value there is an AdvisorError: one line, exit 1).
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Literal, get_args, get_origin

from pydantic import TypeAdapter, ValidationError

from rebalance_advisor.domain.parameters import ParamModel, error_words

#: words that mean "no value" for an optional number, e.g. ``--move-budget unlimited``
NONE_WORDS = ("", "none", "unlimited")


def _non_null(annotation: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), len(args) < len(get_args(annotation))
    return annotation, False


def _checker(model: type[ParamModel], name: str, text_item: bool = False):
    """An argparse ``type``: the text converted and checked by the field's own type and bounds."""
    field = model.model_fields[name]
    annotation, nullable = _non_null(field.annotation)
    if text_item:  # one item of a list field (positional nargs)
        annotation = get_args(annotation)[0]
    metadata = [] if text_item else list(field.metadata)
    adapter = TypeAdapter(typing.Annotated[(annotation, *metadata)] if metadata else annotation)
    numeric = annotation in (int, float)

    def check(text: str) -> Any:
        if nullable and numeric and text.strip().lower() in NONE_WORDS:
            return None
        value: Any = text
        if get_origin(annotation) is tuple and not text_item:
            value = [v.strip() for v in text.split(",") if v.strip()]
        try:
            return adapter.validate_python(value)
        except ValidationError as error:
            problems = "; ".join(error_words(e) for e in error.errors())
            raise argparse.ArgumentTypeError(f"{text!r}: {problems}") from None

    check.__name__ = name  # argparse's "invalid <name> value" wording
    return check


def _default_text(default: Any) -> str:
    if isinstance(default, tuple):
        return ",".join(default) or "none"
    if default is None:
        return "none"
    return f"{default:g}" if isinstance(default, float) else str(default)


def add_options(
    parser: argparse.ArgumentParser, model: type[ParamModel], names: tuple[str, ...] | None = None
) -> None:
    """Add the CLI options of ``model``'s fields (those with a ``cli`` name; only ``names`` if given)."""
    for name, field in model.model_fields.items():
        cli = model.surface_of(name).get("cli")
        if cli is None or (names is not None and name not in names):
            continue
        annotation, nullable = _non_null(field.annotation)
        help_text = field.description or ""
        if not cli.startswith("-"):  # positional
            if get_origin(annotation) is tuple:
                parser.add_argument(
                    cli, nargs="+", type=_checker(model, name, text_item=True), help=help_text
                )
            else:
                parser.add_argument(cli, type=_checker(model, name), metavar=cli.upper(), help=help_text)
            continue
        default = None if field.is_required() else field.default
        if annotation is bool:
            if default is not False:
                raise TypeError(f"{model.__name__}.{name}: a CLI switch must default to False")
            parser.add_argument(cli, dest=name, action="store_true", help=help_text)
            continue
        kwargs: dict[str, Any] = {"dest": name, "default": default, "type": _checker(model, name)}
        if get_origin(annotation) is Literal:
            kwargs["choices"] = get_args(annotation)
        if nullable and annotation in (int, float):
            kwargs["metavar"] = "N|unlimited"
        if get_origin(annotation) is tuple:
            kwargs["metavar"] = "A,B,..."
        parser.add_argument(cli, help=f"{help_text} (default {_default_text(default)})", **kwargs)


def params_from(args: argparse.Namespace, model: type[ParamModel], **overrides: Any) -> Any:
    """The model built from the parsed options (positional ones by their field name), plus ``overrides``."""
    values: dict[str, Any] = {}
    for name in model.model_fields:
        cli = model.surface_of(name).get("cli")
        if cli is None:
            continue
        key = name if cli.startswith("-") else cli
        if hasattr(args, key):
            values[name] = getattr(args, key)
    return model.parse({**values, **overrides})
