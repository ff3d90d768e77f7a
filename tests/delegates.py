"""What a service built of parts promises (lamina.delegation.Delegate): each public call is
one part's own method, bound to that part, with its signature, docstring and coroutine-ness
on the class too (what the blocking facade bridges)."""

from __future__ import annotations

import inspect

from lamina.delegation import Delegate


def delegated_calls(
    service: object, *, documented: bool = True
) -> dict[str, Delegate[..., object]]:
    """The service's calls declared as Delegates, each checked to be its part's method
    (and, ``documented``, to carry a docstring)."""
    klass = type(service)
    delegated = {n: v for n, v in vars(klass).items() if isinstance(v, Delegate)}
    for name, delegate in delegated.items():
        part = getattr(service, delegate.part)
        bound = getattr(service, name)
        assert bound.__self__ is part and bound.__func__ is getattr(type(part), name)
        on_class = getattr(klass, name)
        assert inspect.iscoroutinefunction(on_class) == inspect.iscoroutinefunction(bound)
        assert inspect.signature(on_class) == inspect.signature(getattr(type(part), name))
        assert on_class.__doc__ == bound.__doc__
        assert bound.__doc__ or not documented
    return delegated
