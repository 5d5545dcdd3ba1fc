"""Assigning to a field of a frozen instance (issue 39, item 6): the message names the class and
the field and gives a fix that works for that class. `jdc.replace` calls `__init__` again with
every field as a keyword, so it is offered only where the generated `__init__` takes them;
elsewhere the message offers `copy_and_mutate`, which runs no `__init__`. Each case runs the
fix the message gives, as a user would paste it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Generated:
    a: float
    b: float = 2.0


class Adopted(Generated):  # No new field: the base's generated `__init__`.
    pass


@jdc.pytree_dataclass
class OwnInit:
    a: float
    b: float

    def __init__(self, a: float) -> None:  # `b` is not a parameter: replace fails.
        self.a = a
        self.b = 2 * a


@jdc.pytree_dataclass
class Rescaling:
    a: float

    def __init__(self, a: float) -> None:  # `a` is raw input: replace would scale it again.
        self.a = a / 2


class OwnInitBelowGenerated(Generated):
    def __init__(self, a: float) -> None:
        super().__init__(a, 3.0)


@jdc.pytree_dataclass
class Derived:
    a: float
    b: float = jdc.field(init=False, default=0.0)


@jdc.pytree_dataclass
class WithInitVar:
    a: float
    b: float
    scale: dataclasses.InitVar[float]

    def __post_init__(self, scale: float) -> None:
        self.b = self.b * scale


CASES: dict[str, tuple[Callable[[], Any], str, bool]] = {
    # name: (make an instance, the field assigned, whether replace is the fix offered)
    "generated": (lambda: Generated(1.0), "a", True),
    "adopted": (lambda: Adopted(1.0), "b", True),
    "own_init": (lambda: OwnInit(1.0), "a", False),
    "own_init_rescaling": (lambda: Rescaling(1.0), "a", False),
    "own_init_below_generated": (lambda: OwnInitBelowGenerated(1.0), "b", False),
    "init_false_field": (lambda: Derived(1.0), "b", False),
    "initvar": (lambda: WithInitVar(1.0, 2.0, 3.0), "a", False),
}

_REPLACE = re.compile(r"Use (jdc\.replace\(obj, (\w+)=\.\.\.\)) for a changed copy")
_COPY = re.compile(r"`(with jdc\.copy_and_mutate\(obj\) as copy: copy\.(\w+) = \.\.\.)`")


def refusal(obj: Any, name: str) -> str:
    with pytest.raises(dataclasses.FrozenInstanceError) as caught:
        setattr(obj, name, 5.0)
    return str(caught.value)


def run_fix(message: str, obj: Any) -> Any:
    """The copy that the fix in `message` makes, with 5.0 for its `...`."""
    replace, copy = _REPLACE.search(message), _COPY.search(message)
    namespace: dict[str, Any] = {"jdc": jdc, "obj": obj}
    if replace is not None:
        return eval(replace[1].replace("...", "5.0"), namespace)
    assert copy is not None, message
    exec(copy[1].replace("...", "5.0"), namespace)
    return namespace["copy"]


@pytest.mark.parametrize("case", CASES)
def test_the_fix_in_the_message_makes_the_changed_copy(case: str) -> None:
    make, name, offers_replace = CASES[case]
    obj = make()
    message = refusal(obj, name)
    cls = type(obj).__qualname__
    assert message.startswith(f"cannot assign to field {name!r} of {cls}: ")
    assert (_REPLACE.search(message) is not None) is offers_replace
    changed = run_fix(message, obj)
    assert type(changed) is type(obj)
    assert getattr(changed, name) == 5.0
    others = [f.name for f in dataclasses.fields(obj) if f.name != name]
    assert [getattr(changed, n) for n in others] == [getattr(obj, n) for n in others]
    assert getattr(obj, name) != 5.0  # The original is unchanged.


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("own_init", r"it calls OwnInit\.__init__ again with every field as a keyword"),
        ("own_init_below_generated", r"it calls OwnInitBelowGenerated\.__init__ again"),
        ("init_false_field", r"field 'b' has init=False, which replace refuses"),
        ("initvar", r"it needs the InitVar 'scale' given again"),
    ],
)
def test_the_message_says_why_replace_cannot_make_the_copy(case: str, reason: str) -> None:
    make, name, _ = CASES[case]
    message = refusal(make(), name)
    assert re.search(
        rf"jdc\.replace\(obj, {name}=\.\.\.\) cannot make this copy: {reason}", message
    )


def test_replace_fails_where_the_message_does_not_offer_it() -> None:
    """What the message saves the user from: replace on these classes raises, or (an own
    `__init__` that treats a field as raw input) makes a wrong copy without a word."""
    for case in ("own_init", "init_false_field", "initvar"):
        make, name, _ = CASES[case]
        with pytest.raises((TypeError, ValueError)):
            jdc.replace(make(), **{name: 5.0})
    assert jdc.replace(Rescaling(1.0), a=5.0).a == 2.5
