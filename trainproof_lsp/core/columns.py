"""Typed columns: the memory a metric series takes.

A long pre-training run logs tens of millions of scalars. As Python objects each point
costs a tuple slot (8 bytes) plus an int or float object (24-32 bytes), for steps,
values and record indexes alike; as machine numbers it costs 8 bytes per column. So
series, record positions and the event reader's columns are `array.array`s:

    Ints    array('q'): steps, record indexes, line numbers, byte offsets
    Floats  array('d'): values, wall times

They index, slice (a slice is a column too), iterate, `len`, `bisect` and `sum` like the tuples they replace, and
compare equal to a tuple or list with the same items (as the tuples did), so code and
tests that build or read series are unchanged.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

if TYPE_CHECKING:
    _IntArray = array[int]
    _FloatArray = array[float]
else:  # array is not subscriptable at run time
    _IntArray = _FloatArray = array


def _same_items(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


class _Column:
    """What both columns add to an array: equal to a tuple or list of the same numbers
    (series were tuples before; callers and tests compare them so), unhashable, and a
    repr that names the column."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, list)):
            return _same_items(self, other)
        return array.__eq__(self, other)  # type: ignore[operator]  # self is an array (the subclasses)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable, as an array is

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"  # type: ignore[call-overload]  # an array


class Ints(_Column, _IntArray):
    """A column of 64-bit ints."""

    __slots__ = ()

    def __new__(cls, items: Iterable[int] = ()) -> "Ints":
        return super().__new__(cls, "q", items)  # type: ignore[return-value]


    @overload
    def __getitem__(self, i: SupportsIndex) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> "Ints": ...

    def __getitem__(self, i: SupportsIndex | slice) -> "int | Ints":
        # A slice stays a column (tuple slices stayed tuples); an index is a number.
        if isinstance(i, slice):
            return Ints(array.__getitem__(self, i))
        return array.__getitem__(self, i)


class Floats(_Column, _FloatArray):
    """A column of 64-bit floats."""

    __slots__ = ()

    def __new__(cls, items: Iterable[float] = ()) -> "Floats":
        return super().__new__(cls, "d", items)  # type: ignore[return-value]


    @overload
    def __getitem__(self, i: SupportsIndex) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> "Floats": ...

    def __getitem__(self, i: SupportsIndex | slice) -> "float | Floats":
        # A slice stays a column (tuple slices stayed tuples); an index is a number.
        if isinstance(i, slice):
            return Floats(array.__getitem__(self, i))
        return array.__getitem__(self, i)


def ints(items: Iterable[int]) -> Ints:
    """`items` as an Ints column; an Ints is returned as it is (no copy)."""
    return items if isinstance(items, Ints) else Ints(items)


def floats(items: Iterable[float]) -> Floats:
    """`items` as a Floats column; a Floats is returned as it is (no copy)."""
    return items if isinstance(items, Floats) else Floats(items)
