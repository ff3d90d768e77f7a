"""lamina.delegation.Forward: a service's attribute that is one of its parts' (the calls,
Delegate, are checked on each service by tests/delegates.py)."""

from __future__ import annotations

import pytest

from lamina.delegation import Forward


class Part:
    def __init__(self) -> None:
        self.limit = 3
        self.inner = "held"


class Service:
    limit = Forward[int]("part", "The part's limit.", settable=True)
    held = Forward[str]("part", "What the part holds.", name="inner")

    def __init__(self) -> None:
        self.part = Part()


def test_a_forward_reads_and_sets_the_parts_attribute() -> None:
    service = Service()
    assert service.limit == 3 and service.held == "held"
    service.limit = 5
    assert service.part.limit == 5 and service.limit == 5
    service.part.inner = "changed"
    assert service.held == "changed"


def test_a_read_only_forward_refuses_to_be_set_and_shadowed() -> None:
    service = Service()
    with pytest.raises(AttributeError, match="held is read-only"):
        service.held = "other"
    assert service.held == "held" and "held" not in vars(service)


def test_on_the_class_a_forward_is_itself_with_its_docstring() -> None:
    assert isinstance(Service.limit, Forward)
    assert Service.limit.__doc__ == "The part's limit."
    assert (Service.held.part, Service.held.name, Service.held.settable) == ("part", "inner", False)
