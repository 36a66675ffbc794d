"""Build-once values that stay safe when request threads race for them (standard library only)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class once(Generic[T]):
    """A cached property built exactly once even when request threads race for it.

    functools.cached_property stopped locking in Python 3.12: two threads could each build a
    connection pool or a publisher, and one would leak.
    """

    def __init__(self, build: Callable[[Any], T]) -> None:
        self._build = build
        self._name = build.__name__
        self._lock = threading.Lock()

    @overload
    def __get__(self, instance: None, owner: type) -> once[T]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> T: ...
    def __get__(self, instance: object | None, owner: type) -> once[T] | T:
        if instance is None:
            return self
        values = instance.__dict__
        if self._name not in values:
            with self._lock:
                if self._name not in values:
                    values[self._name] = self._build(instance)
        value: T = values[self._name]
        return value


class Lazy(Generic[T]):
    """A value built by `build` on first `get()`, once."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: T | None = None

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
        return self._value

    @property
    def built(self) -> T | None:
        """The value if it was built, else None (never builds)."""
        return self._value
