"""``Record`` behaves as ``typing.NamedTuple`` does, for every way kvtool builds and reads one.

Each property makes the same class two ways, with ``collections.namedtuple`` (which
``typing.NamedTuple`` makes its classes with) and as a ``Record``, and holds the two to the
same answer: the tuple built (or a TypeError for both), its repr, ``_replace``, ``_asdict``,
``_make``, ``_fields``, ``_field_defaults``, ``__match_args__``.
"""

import collections
import copy
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.record import Record

NAMES = ["a", "b", "c", "d", "e", "f"]
# made at run time, as mypy cannot follow
MAKE_RECORD: Any = type(Record)
MAKE_NAMEDTUPLE: Any = collections.namedtuple


def both(count: int, defaults: int) -> tuple[Any, Any]:
    """The same class made by ``collections.namedtuple`` (what ``typing.NamedTuple`` makes
    its classes with) and as a ``Record``: ``count`` fields, the last ``defaults`` defaulted."""
    names = NAMES[:count]
    values = {name: -(i + 1) for i, name in enumerate(names) if i >= count - defaults}
    typed = MAKE_NAMEDTUPLE("Made", names, defaults=list(values.values()))
    namespace: dict[str, Any] = {"__annotations__": dict.fromkeys(names, int), **values}
    return typed, MAKE_RECORD("Made", (Record,), namespace)


def outcome(cls: Any, args: tuple[int, ...], kwargs: dict[str, int]) -> object:
    try:
        value = cls(*args, **kwargs)
    except TypeError:
        return TypeError
    return (tuple(value), repr(value).split("(", 1)[1], value._asdict())


layouts = st.integers(1, 6).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n)))


@given(
    layouts,
    st.integers(0, 7),
    st.lists(st.sampled_from([*NAMES, "z"]), max_size=4, unique=True),
)
def test_building_one_answers_as_a_named_tuple(
    layout: tuple[int, int], positional: int, keywords: list[str]
) -> None:
    typed, record = both(*layout)
    args = tuple(range(100, 100 + positional))
    kwargs = {name: 200 + i for i, name in enumerate(keywords)}
    assert outcome(record, args, kwargs) == outcome(typed, args, kwargs)


@given(layouts, st.lists(st.sampled_from([*NAMES, "z"]), max_size=3, unique=True))
def test_replace_asdict_and_make_answer_as_a_named_tuple(
    layout: tuple[int, int], changed: list[str]
) -> None:
    typed, record = both(*layout)
    values = tuple(range(layout[0]))
    answers = []
    for cls in (typed, record):
        one = cls(*values)
        try:
            replaced: object = tuple(one._replace(**dict.fromkeys(changed, 7)))
        except (TypeError, ValueError):
            replaced = "refused"
        answers.append(
            (
                replaced,
                one._asdict(),
                cls._make(values) == one,
                cls._fields,
                cls._field_defaults,
                cls.__match_args__,
                one == values,
                hash(one) == hash(values),
            )
        )
    assert answers[0] == answers[1]


class Pickled(Record):
    size: int
    note: str = ""

    @property
    def twice(self) -> int:
        return self.size * 2


def test_a_record_pickles_copies_matches_and_keeps_its_methods() -> None:
    one = Pickled(3)
    back = pickle.loads(pickle.dumps(one))
    assert back == one
    assert type(back) is Pickled
    assert copy.deepcopy(one) == one
    assert one.twice == 6
    assert Pickled.__annotations__ == {"size": int, "note": str}
    match one:
        case Pickled(size, note):
            assert (size, note) == (3, "")
    with pytest.raises(AttributeError):
        one.size = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing required arguments: size"):
        Pickled()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected field names"):
        one._replace(other=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="expected 2 arguments, got 1"):
        Pickled._make([1])


def test_a_record_is_refused_what_a_named_tuple_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        MAKE_RECORD("Bad", (Record,), {"__annotations__": {"a": int, "b": int}, "a": 1})
    with pytest.raises(AttributeError, match="_replace"):
        MAKE_RECORD("Bad", (Record,), {"__annotations__": {"a": int}, "_replace": None})
    with pytest.raises(TypeError, match="from Record only"):
        MAKE_RECORD("Bad", (Record, object), {"__annotations__": {"a": int}})
