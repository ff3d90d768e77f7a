"""A service built of parts declares, one line each, what its parts answer for it:

- ``Delegate``: a public call (``add = Delegate("writes", MemoryWrites.add)``:
  ``ms.memory.add`` is ``ms.memory.writes.add``, with its signature, its docstring and its
  type);
- ``Forward``: an attribute (``counter = Forward[TokenCounter]("consolidation", doc,
  settable=True)``: reading ``ms.memory.counter`` reads ``ms.memory.consolidation.counter``,
  setting it sets the part's)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Delegate(Generic[P, R]):
    """The method ``method`` of the service's part ``part`` (the attribute holding it).

    On the service, it is the part's bound method itself (no wrapper in between); on the
    service's class, a function taking the service first, as a method read off a class is
    (``SyncMemory`` bridges those), a coroutine function when the part's method is one.
    Both carry the part's signature and docstring."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.name = method.__name__
        self.__doc__ = method.__doc__
        self.unbound: Callable[Concatenate[Any, P], R] = _unbound(part, method)

    @overload
    def __get__(self, service: None, owner: type[Any]) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, service: object, owner: type[Any]) -> Callable[P, R]: ...

    def __get__(
        self, service: object | None, owner: type[Any]
    ) -> Callable[P, R] | Callable[Concatenate[Any, P], R]:
        if service is None:
            return self.unbound
        method: Callable[P, R] = getattr(getattr(service, self.part), self.name)
        return method


class Forward(Generic[T]):
    """The attribute of the same name (or ``name``) of the service's part ``part``, read
    through the service, and set through it when ``settable`` (otherwise setting it raises
    AttributeError, as setting a property without a setter does). ``doc`` is its docstring.
    Read off the class, it is the Forward itself."""

    def __init__(
        self, part: str, doc: str, *, settable: bool = False, name: str | None = None
    ) -> None:
        self.part = part
        self.name = name or ""
        self.attribute = self.name
        self.settable = settable
        self.__doc__ = doc

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.attribute = name
        self.name = self.name or name

    @overload
    def __get__(self, service: None, owner: type[Any]) -> Forward[T]: ...

    @overload
    def __get__(self, service: object, owner: type[Any]) -> T: ...

    def __get__(self, service: object | None, owner: type[Any]) -> T | Forward[T]:
        if service is None:
            return self
        value: T = getattr(getattr(service, self.part), self.name)
        return value

    def __set__(self, service: object, value: T) -> None:
        if not self.settable:
            raise AttributeError(f"{self.attribute} is read-only (it is the {self.part}'s)")
        setattr(getattr(service, self.part), self.name, value)


def _unbound(part: str, method: Callable[..., Any]) -> Any:
    """``method`` of the service's part ``part``, called with the service first."""
    name = method.__name__
    if inspect.iscoroutinefunction(method):

        async def run(service: Any, /, *args: Any, **kwargs: Any) -> Any:
            return await getattr(getattr(service, part), name)(*args, **kwargs)

        return functools.wraps(method)(run)

    def call(service: Any, /, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(service, part), name)(*args, **kwargs)

    return functools.wraps(method)(call)
