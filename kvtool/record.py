"""``Record``: ``typing.NamedTuple``'s class syntax, for records made at import time.

``class Size(Record): bytes: int; note: str = ""`` makes what ``typing.NamedTuple`` makes (a
tuple subclass with named fields, defaults, ``_fields``, ``_field_defaults``, ``_make``,
``_replace``, ``_asdict``, its repr, pickling) and mypy checks it as a NamedTuple (it sees
``typing.NamedTuple`` itself). At run time it skips the two costs a NamedTuple class pays when
it is defined: typing's check of each field's annotation (a string annotation is compiled
there) and ``collections.namedtuple``'s ``eval`` of the constructor's source. Together about
0.1 ms a class; ``kvtool size`` defines 25 of them on its way to its answer (docs/architecture.md,
"Start-up"). Building a record with every field by position costs what a NamedTuple's does;
with keywords or defaults it goes through one Python loop instead of a generated signature,
about 1 us more (2.3 us against 0.9 us), on paths that build dozens.
"""

import collections
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar


def _property_getter(index: int, doc: str) -> Any:
    return property(itemgetter(index), doc=doc)


# the C descriptor collections.namedtuple gives its fields (a property where Python lacks it)
_tuplegetter = getattr(collections, "_tuplegetter", _property_getter)

__all__ = ["Record"]

_MISSING: Any = object()
# what a record's namespace may not define (typing.NamedTuple's _prohibited)
_PROHIBITED = frozenset(
    {"_make", "__getnewargs__", "_replace", "__new__", "__slots__", "__init__",
     "_field_defaults", "_asdict", "_source", "_fields"}
)  # fmt: skip


class _RecordTuple(tuple):  # type: ignore[type-arg]
    """The methods every record shares (collections.namedtuple's, written once)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _field_defaults: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _make(cls, iterable: Any) -> Any:
        values = tuple.__new__(cls, iterable)
        if len(values) != len(cls._fields):
            raise TypeError(f"expected {len(cls._fields)} arguments, got {len(values)}")
        return values

    def _replace(self, **changes: Any) -> Any:
        values = self._make(map(changes.pop, self._fields, self))
        if changes:
            raise TypeError(f"got unexpected field names: {list(changes)!r}")
        return values

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))

    def __repr__(self) -> str:
        pairs = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({pairs})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)


def _constructor(name: str, fields: tuple[str, ...], defaults: dict[str, Any]) -> Any:
    """A ``__new__`` taking the fields by position or name, the defaulted ones optional."""
    count = len(fields)
    index = {field: i for i, field in enumerate(fields)}
    filled = [defaults.get(field, _MISSING) for field in fields]
    required = [i for i, field in enumerate(fields) if field not in defaults]

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        if len(args) == count and not kwargs:
            return tuple.__new__(cls, args)
        if len(args) > count:
            raise TypeError(f"{name}() takes {count} arguments but {len(args)} were given")
        values = [*args, *filled[len(args) :]]
        for key, value in kwargs.items():
            at = index.get(key)
            if at is None:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
            if at < len(args):
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            values[at] = value
        for i in required:
            if values[i] is _MISSING:
                missing = [fields[i] for i in required if values[i] is _MISSING]
                raise TypeError(f"{name}() missing required arguments: {', '.join(missing)}")
        return tuple.__new__(cls, values)

    return __new__


class _RecordMeta(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        if not bases:  # Record itself
            return super().__new__(mcls, name, bases, namespace)
        if bases != (Record,):
            raise TypeError("a record inherits from Record only")
        annotations = namespace.get("__annotations__", {})
        fields = tuple(annotations)
        defaults: dict[str, Any] = {}
        for field in fields:
            if field in namespace:
                defaults[field] = namespace[field]
            elif defaults:
                raise TypeError(f"{name}: field {field} without a default follows one with")
        body = {"__slots__": (), "_fields": fields, "_field_defaults": defaults}
        for key, value in namespace.items():
            if key in _PROHIBITED:
                raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
            if key not in fields:
                body[key] = value
        body["__match_args__"] = fields
        body["__new__"] = _constructor(name, fields, defaults)
        for i, field in enumerate(fields):
            body[field] = _tuplegetter(i, f"Alias for field number {i}")
        return type(name, (_RecordTuple,), body)


if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:

    class Record(metaclass=_RecordMeta):
        """Subclass as ``typing.NamedTuple`` is subclassed."""
