"""Class hierarchies as data, hypothesis strategies that generate them, and the one builder that
turns a hierarchy into classes with a given decorator (tests/classes/test_differential.py).

A `Hierarchy` is 1 to 4 levels; level k subclasses level k-1 and may add bases of its own (a
pytree dataclass, a plain dataclass, a mixin, an ABC). `build` writes the Python source of the
whole hierarchy and executes it level by level in one importable module (`MODULE`), so the
classes pickle by reference and their `__init__`/`__post_init__` are ordinary methods. The same
source runs with `dataclass` bound to `jdc.pytree_dataclass` or to the standard library's
`dataclasses.dataclass(frozen=True)`.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import jax
import jax.numpy as jnp
from hypothesis import strategies as st

import jax_dataclasses as jdc

NAMES = ("a", "b", "c", "d", "e")
"""Field names: a small pool, so that levels re-declare each other's fields."""

Flavour = Literal["ours", "std"]


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One annotated name in a class body."""

    name: str
    kind: Literal["field", "initvar", "classvar"] = "field"
    static: Literal["", "annotation", "metadata", "pytree_node", "child_metadata"] = ""
    """`Static[int]`, `metadata={"static": True}`, `{"pytree_node": False}`, or a field
    that says `{"pytree_node": True}` (a child)."""
    default: Literal["", "value", "factory", "array"] = ""
    init: bool = True
    kw_only: bool | None = None
    """`field(kw_only=...)`; None: not given."""
    call: bool = False
    """Spell a plain default as `field(default=...)`."""
    type: Literal["int", "later", "checker", "alias_before", "alias_after"] = "int"
    """The annotated type (inside `Static[...]` where static by annotation): `int`, a class
    defined after the hierarchy (`Later`), a name only type checkers see (`OnlyForCheckers`,
    never defined), an alias of `Static[int]` defined before the hierarchy (`StaticInt`), or
    one defined after it (`StaticLater`). Names defined later need string annotations, or
    Python 3.14's lazy ones; before 3.14 both builds fail alike with `NameError` otherwise."""


@dataclasses.dataclass(frozen=True)
class BaseSpec:
    """A base class a level adds besides the level above it."""

    kind: Literal["pytree", "plain", "mutable_plain", "unhashable_plain", "mixin", "abc"]
    fields: tuple[FieldSpec, ...] = ()
    """For `pytree` (decorated like the levels), `plain` (`dataclasses.dataclass(frozen=True)`)
    and `mutable_plain` (`dataclasses.dataclass`, so `__hash__` is None). `unhashable_plain`
    (frozen, `__hash__ = None`) is what the standard library can have instead of the last."""


@dataclasses.dataclass(frozen=True)
class ClassSpec:
    """One level of a hierarchy."""

    decorated: bool = True
    options: tuple[tuple[str, bool], ...] = ()
    """Arguments of the decorator (`eq`, `order`, `unsafe_hash`, `slots`, `kw_only`, ...)."""
    fields: tuple[FieldSpec, ...] = ()
    kw_only_marker: int | None = None
    """`_: KW_ONLY` before `fields[kw_only_marker]` (at the end if it is `len(fields)`)."""
    bases: tuple[BaseSpec, ...] = ()
    bases_first: bool = False
    """`class L1(Extra, L0)` rather than `class L1(L0, Extra)`."""
    implements_abstract: bool = True
    """Define the method an `abc` base declares abstract."""
    init: Literal["", "explicit", "partial", "forward"] = ""
    """Own `__init__`: one parameter per field, setting each (`explicit`), all but the last
    (`partial`), or `**kwargs` passed to `super().__init__` (`forward`)."""
    post_init: bool = False
    post_init_super: bool = False
    """`__post_init__` calls `super().__post_init__` (where a level above defines one)."""
    bumps: bool = False
    """`__post_init__` changes the first field the level declares."""


@dataclasses.dataclass(frozen=True)
class Hierarchy:
    levels: tuple[ClassSpec, ...]
    assign: Literal["setattr", "self"] = "setattr"
    """How own `__init__` and `__post_init__` bodies assign fields: `object.__setattr__(self,
    "x", v)` (what a frozen dataclass needs) or `self.x = v` (which we allow)."""
    string_annotations: bool = False
    """Compile the source with `from __future__ import annotations`."""


# -- strategies ---------------------------------------------------------------------------


def _weighted(*pairs: tuple[Any, int]) -> st.SearchStrategy[Any]:
    """`sampled_from` with repetitions as weights; shrinks towards the first value."""
    return st.sampled_from([value for value, weight in pairs for _ in range(weight)])


def field_specs(
    kinds: tuple[str, ...] = ("field", "initvar", "classvar"), arrays: bool = False
) -> st.SearchStrategy[FieldSpec]:
    """One field; a JAX array default only with `arrays` (the standard library refuses the
    class, and the oracle compares no further: see `hierarchies`)."""
    kind = _weighted(*((k, {"field": 8, "initvar": 2, "classvar": 1}[k]) for k in kinds))
    return st.builds(
        FieldSpec,
        name=st.sampled_from(NAMES),
        kind=kind,
        static=_weighted(
            ("", 6), ("annotation", 3), ("metadata", 1), ("pytree_node", 1), ("child_metadata", 1)
        ),
        default=_weighted(("value", 6), ("", 3), ("factory", 2), ("array", 2 if arrays else 0)),
        init=_weighted((True, 6), (False, 1)),
        kw_only=_weighted((None, 6), (True, 1), (False, 1)),
        call=st.booleans(),
        type=_weighted(
            ("int", 12), ("later", 1), ("checker", 1), ("alias_before", 1), ("alias_after", 1)
        ),
    ).map(_normalise_field)


def _normalise_field(spec: FieldSpec) -> FieldSpec:
    """Drop what a kind ignores, so that shrunk examples read simply."""
    if spec.kind == "classvar":
        return FieldSpec(spec.name, "classvar", default="value")
    if spec.kind == "initvar":
        default = "value" if spec.default == "array" else spec.default
        return dataclasses.replace(spec, static="", default=default, init=True, type="int")
    if spec.default == "array" or (spec.type.startswith("alias") and spec.static):
        return dataclasses.replace(spec, type="int")  # An alias is the static annotation.
    return spec


def _no_array_default_in_plain_bases(base: BaseSpec) -> BaseSpec:
    """The standard library's decorator refuses them in both builds."""
    if base.kind == "pytree":
        return base
    fields = tuple(
        dataclasses.replace(f, default="value") if f.default == "array" else f for f in base.fields
    )
    return dataclasses.replace(base, fields=fields)


OPTION_CHOICES = (
    ("eq", False),
    ("order", True),
    ("unsafe_hash", True),
    ("slots", True),
    ("kw_only", True),
    ("repr", False),
    ("match_args", False),
    ("weakref_slot", True),
    ("frozen", True),
    ("frozen", False),
)

options = st.lists(
    _weighted(
        *(
            (choice, 1 if choice[0] in ("frozen", "weakref_slot") else 3)
            for choice in OPTION_CHOICES
        )
    ),
    max_size=2,
    unique_by=lambda option: option[0],
).map(tuple)


def base_specs(arrays: bool) -> st.SearchStrategy[BaseSpec]:
    fields = field_specs(("field",), arrays)
    return st.one_of(
        st.builds(
            BaseSpec,
            kind=_weighted(("pytree", 3), ("plain", 2), ("mutable_plain", 1)),
            fields=st.lists(fields, max_size=2, unique_by=lambda f: f.name).map(tuple),
        ).map(_no_array_default_in_plain_bases),
        st.builds(BaseSpec, kind=st.sampled_from(["mixin", "abc"])),
    )


@st.composite
def class_specs(draw: st.DrawFn, arrays: bool = False) -> ClassSpec:
    field_spec = field_specs(arrays=arrays)
    fields = tuple(draw(st.lists(field_spec, max_size=3, unique_by=lambda f: f.name)))
    marker = draw(st.none() | st.integers(0, len(fields)))
    return ClassSpec(
        decorated=draw(_weighted((True, 5), (False, 1))),
        options=draw(options),
        fields=fields,
        kw_only_marker=None if draw(_weighted((True, 4), (False, 1))) else marker,
        bases=tuple(
            draw(base_specs(arrays)) for _ in range(draw(_weighted((0, 5), (1, 3), (2, 1))))
        ),
        bases_first=draw(st.booleans()),
        implements_abstract=draw(_weighted((True, 4), (False, 1))),
        init=draw(_weighted(("", 8), ("explicit", 2), ("forward", 1), ("partial", 1))),
        post_init=draw(_weighted((False, 2), (True, 1))),
        post_init_super=draw(st.booleans()),
        bumps=draw(st.booleans()),
    )


@st.composite
def hierarchies(
    draw: st.DrawFn, assign: st.SearchStrategy[Literal["setattr", "self"]] | None = None
) -> Hierarchy:
    """A hierarchy; one in five may have JAX array defaults. The standard library refuses
    those (a mutable default) and the oracle only checks that we define the class: with an
    array default in every third hierarchy, as per-field odds gave, a third of the examples
    compared nothing else."""
    arrays = draw(_weighted((False, 4), (True, 1)))
    depth = draw(_weighted((1, 2), (2, 3), (3, 3), (4, 2)))
    return Hierarchy(
        levels=tuple(draw(class_specs(arrays)) for _ in range(depth)),
        assign=draw(assign if assign is not None else _weighted(("setattr", 9), ("self", 1))),
        string_annotations=draw(_weighted((False, 4), (True, 1))),
    )


# -- the module the classes live in --------------------------------------------------------

MODULE = types.ModuleType("_jdc_differential_classes")
"""Where generated classes are defined: importable (it is in `sys.modules`), so instances
pickle by reference, as instances of classes defined in a user's module do."""
sys.modules[MODULE.__name__] = MODULE

CALLS: list[tuple[Any, ...]] = []
"""What generated `__init__`s and `__post_init__`s were called with, in order."""
UNSET = "<unset>"


def plain(value: object) -> object:
    """`value` if it is a number or string (what the generated code stores; tuples of them
    too), else its type's name: the builds being compared hold different objects (a `Field`
    left as a class attribute, say), which compare by identity."""
    if type(value) is tuple:
        return tuple(plain(item) for item in value)
    return value if type(value) in (int, float, str) else f"<{type(value).__name__}>"


def values_of(obj: object) -> tuple[tuple[str, object], ...]:
    """The fields of `obj`, by name, in order (`UNSET` where it has none)."""
    fields = dataclasses.fields(obj)  # type: ignore[arg-type]
    return tuple((f.name, plain(getattr(obj, f.name, UNSET))) for f in fields)


def _record(*entry: Any) -> None:
    CALLS.append(plain(entry))  # type: ignore[arg-type]


def _fill(obj: object, assign: Callable[[object, str, object], None]) -> None:
    """Set each field `obj` does not have yet (what a `__post_init__` computes)."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if not hasattr(obj, f.name):
            assign(obj, f.name, fallback(f.name))


def fallback(name: str) -> int:
    return 700 + NAMES.index(name) if name in NAMES else 799


def _namespace(flavour: Flavour) -> dict[str, Any]:
    decorator: Any = (
        jdc.pytree_dataclass
        if flavour == "ours"
        else functools.partial(dataclasses.dataclass, frozen=True)
    )
    return {
        "abc": abc,
        "dataclasses": dataclasses,
        "jax": jax,
        "jnp": jnp,
        "field": dataclasses.field,
        "InitVar": dataclasses.InitVar,
        "KW_ONLY": dataclasses.KW_ONLY,
        "ClassVar": typing.ClassVar,
        "Static": jdc.Static,
        "StaticInt": jdc.Static[int],
        "dataclass": decorator,
        "record": _record,
        "snapshot": values_of,
        "fill": _fill,
    }


# -- the builder --------------------------------------------------------------------------


@dataclasses.dataclass
class Built:
    """A hierarchy built with one flavour: its classes (as far as definition got) and source."""

    flavour: Flavour
    source: list[str] = dataclasses.field(default_factory=list)
    levels: list[type] = dataclasses.field(default_factory=list)
    roles: dict[type, str] = dataclasses.field(default_factory=dict)
    """Each generated class: `decorated`/`undecorated` (a level) or its `BaseSpec.kind`."""
    names: list[str] = dataclasses.field(default_factory=list)
    error: Exception | None = None
    string_annotations: bool = False

    @property
    def leaf(self) -> type:
        return self.levels[-1]


def build(hierarchy: Hierarchy, flavour: Flavour, prefix: str) -> Built:
    """Define the classes of `hierarchy` in `MODULE`, decorated as `flavour` says. What a class
    statement raises is kept in `built.error`, and definition stops there."""
    built = Built(flavour, string_annotations=hierarchy.string_annotations)
    namespace = vars(MODULE)
    namespace.update(_namespace(flavour))
    for name in DEFINED_AFTER:  # Left by the previous hierarchy.
        namespace.pop(name, None)
    values = iter(range(100, 10_000))
    try:
        for k, level in enumerate(hierarchy.levels):
            name = f"{prefix}L{k}"
            extra: list[str] = []
            for j, base in enumerate(level.bases):
                base_name = f"{name}B{j}"
                _exec(built, _base_source(base_name, base, values), base_name, base.kind)
                extra.append(base_name)
            above = [f"{prefix}L{k - 1}"] if k else []
            bases = [*extra, *above] if level.bases_first else [*above, *extra]
            base_classes = [namespace[b] for b in bases]
            lines = _level_source(hierarchy, k, name, bases, base_classes, values)
            _exec(built, lines, name, "decorated" if level.decorated else "undecorated")
            built.levels.append(namespace[name])
    except Exception as error:
        built.error = error
    namespace.update(DEFINED_AFTER)
    return built


DEFINED_AFTER: Mapping[str, object] = {
    "Later": type("Later", (), {}),
    "StaticLater": jdc.Static[int],
}
"""Names the hierarchy's annotations may use that are defined after its classes."""


def forget(built: Built) -> None:
    """Remove the classes of `built` from `MODULE` (JAX keeps its registrations)."""
    for name in built.names:
        vars(MODULE).pop(name, None)


def _exec(built: Built, lines: list[str], name: str, role: str) -> None:
    if built.string_annotations and not built.source:
        built.source.append("from __future__ import annotations\n")
    built.source.extend([*lines, ""])
    built.names.append(name)
    vars(MODULE).pop(name, None)
    header = ["from __future__ import annotations"] if built.string_annotations else []
    source = "\n".join([*header, *lines])
    code = compile(source, f"<differential {name}>", "exec", dont_inherit=True)
    exec(code, vars(MODULE))
    built.roles[vars(MODULE)[name]] = role


def _base_source(name: str, base: BaseSpec, values: Iterator[int]) -> list[str]:
    if base.kind == "mixin":
        return [f"class {name}:", "    def mixin(self):", f"        return {name!r}"]
    if base.kind == "abc":
        return [
            f"class {name}(abc.ABC):",
            "    @abc.abstractmethod",
            "    def abstract(self): ...",
        ]
    decorator = {
        "pytree": "@dataclass",
        "plain": "@dataclasses.dataclass(frozen=True)",
        "mutable_plain": "@dataclasses.dataclass",
        "unhashable_plain": "@dataclasses.dataclass(frozen=True)",
    }[base.kind]
    body = [f"    {_field_line(f, next(values))}" for f in base.fields]
    if base.kind == "unhashable_plain":
        body.append("    __hash__ = None")
    body = body or ["    pass"]
    return [decorator, f"class {name}:", *body]


def _field_line(f: FieldSpec, value: int) -> str:
    if f.kind == "classvar":
        return f"{f.name}: ClassVar[int] = {value}"
    if f.kind == "initvar":
        annotation = "InitVar[int]"
    elif f.default == "array":
        annotation = "Static[jax.Array]" if f.static == "annotation" else "jax.Array"
    else:
        annotation = {
            "int": "int",
            "later": "Later",
            "checker": "OnlyForCheckers",
            "alias_before": "StaticInt",
            "alias_after": "StaticLater",
        }[f.type]
        if f.static == "annotation":
            annotation = f"Static[{annotation}]"
    default = {"": "", "value": f"{value}", "array": "jnp.zeros(())", "factory": ""}[f.default]
    args = [f"default={default}"] if default else []
    if f.default == "factory":
        args.append(f"default_factory=lambda: {value}")
    if not f.init:
        args.append("init=False")
    if f.kw_only is not None:
        args.append(f"kw_only={f.kw_only}")
    metadata = {
        "metadata": '{"static": True}',
        "pytree_node": '{"pytree_node": False}',
        "child_metadata": '{"pytree_node": True}',
    }.get(f.static)
    if metadata:
        args.append(f"metadata={metadata}")
    if not args:
        return f"{f.name}: {annotation}"
    if args == [f"default={default}"] and not f.call:
        return f"{f.name}: {annotation} = {default}"
    return f"{f.name}: {annotation} = field({', '.join(args)})"


def _level_source(
    hierarchy: Hierarchy,
    k: int,
    name: str,
    bases: list[str],
    base_classes: list[type],
    values: Iterator[int],
) -> list[str]:
    level = hierarchy.levels[k]
    lines: list[str] = []
    if level.decorated:
        args = ", ".join(f"{option}={value}" for option, value in level.options)
        lines.append(f"@dataclass({args})" if args else "@dataclass")
    lines.append(f"class {name}({', '.join(bases)}):" if bases else f"class {name}:")
    body: list[str] = []
    for i, f in enumerate(level.fields):
        if level.kw_only_marker == i:
            body.append("_: KW_ONLY")
        body.append(_field_line(f, next(values)))
    if level.kw_only_marker is not None and level.kw_only_marker >= len(level.fields):
        body.append("_: KW_ONLY")
    if level.implements_abstract:
        body += ["", "def abstract(self):", f"    return {name!r}"]

    def assign(target: str, value: str) -> str:
        if hierarchy.assign == "self":
            return f"self.{target} = {value}"
        return f"object.__setattr__(self, {target!r}, {value})"

    own = [f.name for f in level.fields if f.kind == "field"] if level.decorated else []
    if level.init in ("explicit", "partial"):
        names = resolved_fields(level, base_classes)
        params = ", ".join(f"{n}={next(values)}" for n in names)
        body += ["", f"def __init__(self, {params}):" if params else "def __init__(self):"]
        body.append(f"    record({name + '.__init__'!r}, {', '.join(names)})")
        set_names = names[:-1] if level.init == "partial" else names
        body += [f"    {assign(n, n)}" for n in set_names]
    elif level.init == "forward":
        body += [
            "",
            "def __init__(self, **kwargs):",
            f"    record({name + '.__init__'!r}, tuple(sorted(kwargs.items())))",
            "    super().__init__(**kwargs)",
        ]
        for n in own:
            body += [f"    if not hasattr(self, {n!r}):", f"        {assign(n, str(next(values)))}"]
    if level.post_init:
        body += [
            "",
            "def __post_init__(self, *initvars):",
            f"    record({name + '.__post_init__'!r}, initvars, snapshot(self))",
        ]
        if level.post_init_super and any(hierarchy.levels[j].post_init for j in range(k)):
            body.append("    super().__post_init__(*initvars)")
        setter = "setattr" if hierarchy.assign == "self" else "object.__setattr__"
        body.append(f"    fill(self, {setter})")
        if level.bumps and own:
            body.append(f"    {assign(own[0], f'self.{own[0]} + 1')}")
    lines += [f"    {line}" if line else "" for line in body or ["pass"]]
    return lines


def leaf_mro_roles(hierarchy: Hierarchy) -> list[str] | None:
    """The roles (`decorated`, `undecorated`, or a `BaseSpec.kind`) of the classes in the MRO
    the leaf class of `hierarchy` will have; None if Python would refuse its bases."""
    above: list[type] = []
    try:
        for level in hierarchy.levels:
            extra = [type("Base", (), {"role": base.kind}) for base in level.bases]
            bases = [*extra, *above] if level.bases_first else [*above, *extra]
            role = "decorated" if level.decorated else "undecorated"
            above = [type("Level", tuple(bases), {"role": role})]
    except TypeError:
        return None
    return [klass.__dict__["role"] for klass in above[0].__mro__[:-1]]


def resolved_fields(level: ClassSpec, base_classes: list[type]) -> list[str]:
    """The names of the fields a class of `level` with these bases has, collected as
    `dataclasses` does (every class in the MRO, the level's own annotations last)."""
    fields: dict[str, bool] = {}
    for base in reversed(_mro(base_classes)):
        for f in getattr(base, "__dataclass_fields__", {}).values():
            fields[f.name] = f._field_type is dataclasses._FIELD  # type: ignore[attr-defined]
    if level.decorated:
        for f in level.fields:
            fields[f.name] = f.kind == "field"
    return [name for name, is_field in fields.items() if is_field]


def _mro(bases: list[type]) -> list[type]:
    """The MRO (without the class itself) a class with `bases` would have: C3, or [] where
    Python would refuse the class."""
    sequences = [list(b.__mro__) for b in bases] + [list(bases)]
    result: list[type] = []
    while any(sequences):
        sequences = [s for s in sequences if s]
        for sequence in sequences:
            head = sequence[0]
            if not any(head in s[1:] for s in sequences):
                break
        else:
            return []
        result.append(head)
        sequences = [s[1:] if s[0] is head else s for s in sequences]
    return result


def static_names(fields: tuple[dataclasses.Field[Any], ...]) -> set[str]:
    """The fields that are static by the documented rules (docs/guides/static-fields.md): an
    outermost `Static[...]`, or metadata `static=True` / `pytree_node=False`."""
    marker = jdc.Static[int].__metadata__[0]  # type: ignore[attr-defined]
    names: set[str] = set()
    for f in fields:
        metadata: Mapping[str, object] = f.metadata
        if isinstance(f.type, str):  # from __future__ import annotations
            static = f.type.startswith("Static[") or f.type == "StaticInt"
        else:
            static = marker in getattr(f.type, "__metadata__", ())
        by_metadata = metadata.get("static") is True or metadata.get("pytree_node") is False
        if static or by_metadata:
            names.add(f.name)
    return names
