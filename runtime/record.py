"""Frozen records: what the one-shot commands used of frozen dataclasses, without ``dataclasses``.

A ``Record`` subclass is declared like a ``@dataclass(frozen=True)``: annotated fields in
order (a base record's first), defaults, ``field(default_factory=...)``. One ``__init__``,
``__repr__``, ``__eq__``, ``__hash__`` and frozen ``__setattr__`` here serve every record;
nothing is compiled per class. ``plan``/``dirty``/``fork`` start with these (issue 13):
``dataclasses`` imports ``inspect`` (with ``ast``, ``dis``, ``tokenize``), ≈ 6 ms of a one-shot
command where orjson does not import it itself (orjson < 3.9), and each frozen dataclass
compiles its generated methods at import (``exec``, ≈ 0.1 ms apiece) wherever it runs.
``typing.dataclass_transform`` lets mypy check every constructor call and field type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Self, TypeVar, cast, dataclass_transform

_T = TypeVar("_T")
_NO_DEFAULT: Any = object()


class FrozenRecordError(AttributeError):
    """An assignment to or deletion of a record's attribute (records are immutable)."""


class _Factory:
    """A field default made per instance (``field(default_factory=...)``)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], _T]) -> _T:
    """A field whose default ``default_factory()`` makes for each new record."""
    # stands in for the value until the class is made (typed as one for mypy)
    return cast(_T, _Factory(default_factory))


def _is_class_var(hint: object) -> bool:
    if isinstance(hint, str):  # postponed annotations, as dataclasses reads them
        return hint.startswith(("ClassVar", "typing.ClassVar"))
    return hint is ClassVar or getattr(hint, "__origin__", None) is ClassVar


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Record:
    """An immutable value: fields from the class's annotations, compared and hashed by value."""

    __slots__ = ()
    __record_fields__: ClassVar[tuple[str, ...]] = ()
    __record_defaults__: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = list(cls.__record_fields__)  # a base record's fields first, as dataclasses
        defaults = dict(cls.__record_defaults__)
        for name, hint in cls.__dict__.get("__annotations__", {}).items():
            if _is_class_var(hint):
                continue
            if name not in names:
                names.append(name)
            default = cls.__dict__.get(name, _NO_DEFAULT)
            if isinstance(default, _Factory):
                delattr(cls, name)  # the instance always has its own
            if default is _NO_DEFAULT:
                defaults.pop(name, None)
            else:
                defaults[name] = default
        required = [n for n in names if n not in defaults]
        if required and names.index(required[-1]) >= len(required):
            raise TypeError(f"record {cls.__qualname__}: field {required[-1]!r} has no default "
                            "but follows one that has")
        cls.__record_fields__ = tuple(names)  # (no __match_args__: nothing matches on them)
        cls.__record_defaults__ = defaults

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        names = cls.__record_fields__
        if len(args) > len(names):
            raise TypeError(f"{cls.__qualname__}() takes {len(names)} positional arguments "
                            f"but {len(args)} were given")
        given = dict(zip(names, args, strict=False))  # fewer args than names: defaults
        for name, value in kwargs.items():
            if name in given:
                raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
            given[name] = value
        state = vars(self)  # written directly: the frozen __setattr__ refuses every name
        missing = []
        for name in names:
            value = given.pop(name, _NO_DEFAULT)
            if value is _NO_DEFAULT:
                value = cls.__record_defaults__.get(name, _NO_DEFAULT)
                if isinstance(value, _Factory):
                    value = value.make()
                elif value is _NO_DEFAULT:
                    missing.append(name)
            state[name] = value
        if given:
            raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument "
                            f"{next(iter(given))!r}")
        if missing:
            raise TypeError(f"{cls.__qualname__}() missing required argument(s): "
                            + ", ".join(map(repr, missing)))

    def _values(self) -> tuple[Any, ...]:
        state = vars(self)
        return tuple(state[name] for name in self.__record_fields__)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_fields__)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenRecordError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenRecordError(f"cannot delete field {name!r}")

    def replace(self, **changes: Any) -> Self:
        """A copy of this record with ``changes`` applied, checked as ``__init__`` checks."""
        state = vars(self)
        return type(self)(**{name: state[name] for name in self.__record_fields__} | changes)


def fields(record: Record | type[Record]) -> tuple[str, ...]:
    """The field names of ``record`` (a record or its class), in ``__init__``'s order."""
    return record.__record_fields__


def defaults(record: type[Record]) -> dict[str, Any]:
    """Each defaulted field of ``record`` with its default (a fresh one from a factory)."""
    return {name: value.make() if isinstance(value, _Factory) else value
            for name, value in record.__record_defaults__.items()}
