"""What the hostile-input tests share: every leaf of a parsed example file, the file with one
leaf replaced, and the wrong values to put there."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def leaves(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path to every value in ``data`` (the whole first; the first two of each list)."""
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data[:2]):
            yield from leaves(value, (*path, index))


def replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``data`` with the value at ``path`` replaced by ``value``."""
    if not path:
        return value
    out = copy.deepcopy(data)
    cursor = out
    for step in path[:-1]:
        cursor = cursor[step]
    cursor[path[-1]] = value
    return out
