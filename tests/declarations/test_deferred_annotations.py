"""Annotations that name something defined later: Python 3.14's lazy annotations (PEP 649),
and `from __future__ import annotations` on every version.

Each case is a module's source, run once with the future import and, on Python 3.14, once
without it (earlier Pythons evaluate annotations at class definition, so a later name is a
`NameError` there, for the standard library too). Where the standard library defines the
behaviour, the same source decorated with `dataclasses.dataclass(frozen=True)` is the oracle.
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import re
import sys
import typing
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from helpers import SPELLINGS, children, define, run_python, statics

import jax_dataclasses as jdc


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_each_spelling_reads_annotations_as_it_says(spelling: str) -> None:
    module = define("class Early:\n    later: Later\nclass Later:\n    pass\n", spelling)
    annotation = field_types(dataclasses.dataclass(module.Early))["later"]
    assert annotation == "Later" if spelling == "future import" else annotation is module.Later


def init_annotations(cls: type) -> dict[str, object]:
    """`cls.__init__`'s annotations, names not defined yet as `ForwardRef`s on 3.14."""
    if sys.version_info >= (3, 14):
        import annotationlib

        return annotationlib.get_annotations(cls.__init__, format=annotationlib.Format.FORWARDREF)
    return dict(cls.__init__.__annotations__)


def signature(cls: type) -> inspect.Signature:
    if sys.version_info >= (3, 14):
        import annotationlib

        return inspect.signature(cls, annotation_format=annotationlib.Format.FORWARDREF)
    return inspect.signature(cls)


def field_types(cls: type) -> dict[str, object]:
    return {f.name: f.type for f in dataclasses.fields(cls)}


def _text(value: object) -> str:
    """`value`'s text without what differs between two builds of one source: a `ForwardRef`'s
    owner class (also inside other types, on 3.14), and the module (`defined_<n>`)."""
    return re.sub(r"defined_\d+", "defined", re.sub(r", owner=<[^>]*>", "", str(value)))


def same_types(ours: dict[str, object], std: dict[str, object]) -> bool:
    """Field types equal, compared by their text (`_text`)."""
    return {k: _text(repr(v)) for k, v in ours.items()} == {
        k: _text(repr(v)) for k, v in std.items()
    }


LATER_NAMES = """
import dataclasses
from typing import TYPE_CHECKING, Optional
import jax
import jax_dataclasses as jdc
if TYPE_CHECKING:
    from collections import OrderedDict as OnlyForCheckers

@DECORATE
class Model:
    x: jax.Array
    later: Later
    config: jdc.Static[Later] = None
    checked: OnlyForCheckers = None
    checked_static: jdc.Static[OnlyForCheckers] = None
    many: list[Later] = dataclasses.field(default_factory=list)
    maybe: Optional[Later] = None

class Sub(Model):
    pass

class Later:
    pass
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_names_defined_later_or_only_for_checkers_are_accepted_like_the_standard_library(
    spelling: str,
) -> None:
    ours = define(LATER_NAMES, spelling)
    std = define(LATER_NAMES, spelling, "@dataclasses.dataclass(frozen=True)")
    assert same_types(field_types(ours.Model), field_types(std.Model))
    model = ours.Model(jnp.ones(2), None)
    assert statics(ours.Model) == ("config", "checked_static")
    assert children(ours.Model) == ("x", "later", "checked", "many", "maybe")
    assert jax.tree.leaves(model) == [model.x]
    assert jax.tree.leaves(ours.Sub(jnp.ones(1), None)) == [jnp.ones(1)]
    # What runtime type checkers read from `__init__`: the standard library's answers.
    assert same_types(init_annotations(ours.Model), init_annotations(std.Model))
    assert _text(signature(ours.Model)) == _text(signature(std.Model))


STATIC_ALIAS_LATER = """
import jax
import jax_dataclasses as jdc

@DECORATE
class Solver:
    x: jax.Array
    iters: MyStatic = 3

MyStatic = jdc.Static[int]
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("use", ["construct", "flatten", "jit"])
def test_a_static_alias_defined_after_the_class_before_its_first_use_makes_it_static(
    spelling: str, use: str
) -> None:
    module = define(STATIC_ALIAS_LATER, spelling)
    solver = object.__new__(module.Solver)  # As pickle builds one: no __init__.
    object.__setattr__(solver, "x", jnp.ones(2))
    object.__setattr__(solver, "iters", 3)
    first_use = {
        "construct": lambda: module.Solver(jnp.ones(2)),
        "flatten": lambda: jax.tree.leaves(solver),
        "jit": lambda: jax.jit(lambda s: s.x * s.iters)(solver),
    }
    first_use[use]()
    assert statics(module.Solver) == ("iters",)
    assert len(jax.tree.leaves(module.Solver(jnp.ones(2), 4))) == 1
    # 1.6.3 read the annotations at the first use too: static, so not in its checkpoints.
    assert len(jdc.v1_6_layout(solver)) == 1


STATIC_ALIAS_AFTER_THE_CLASS_IN_A_FUNCTION = """
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

def make_solver():
    @jdc.pytree_dataclass
    class Solver:
        x: jax.Array
        iters: MyStatic = 3

    MyStatic = jdc.Static[int]
    return Solver(jnp.ones(2))

def make_quoted():
    @jdc.pytree_dataclass
    class Quoted:
        x: jax.Array
        iters: "MyStatic" = 3

    MyStatic = jdc.Static[int]
    return Quoted(jnp.ones(2))

@jdc.jit
def run(solver):
    return solver.x * solver.iters
"""


@pytest.mark.parametrize("future", [True, False])
def test_a_local_static_alias_defined_after_the_class_in_its_function_is_seen(
    future: bool,
) -> None:
    """The late decision reads the function's names as they are then, not a copy taken when
    the class was decorated (issue 30: a traced leaf, silently, before). Quoted, as the
    static-fields guide shows, or under the future import, on every Python; bare on 3.14."""
    module = define(STATIC_ALIAS_AFTER_THE_CLASS_IN_A_FUNCTION, "future import" if future else "")
    makers = [module.make_quoted]
    if future or sys.version_info >= (3, 14):
        makers.append(module.make_solver)
    for make in makers:
        solver = make()
        assert statics(type(solver)) == ("iters",)
        assert len(jax.tree.leaves(solver)) == 1
        assert module.run(solver).tolist() == [3.0, 3.0]


OPTIONAL_OF_LATER_ALIAS = """
from typing import Optional
import jax
import jax_dataclasses as jdc

@DECORATE
class Solver:
    x: jax.Array
    iters: Optional[MyStatic] = None

MyStatic = jdc.Static[int]
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_later_static_alias_nested_in_another_type_is_the_nested_static_error(
    spelling: str,
) -> None:
    module = define(OPTIONAL_OF_LATER_ALIAS, spelling)
    with pytest.raises(jdc.StaticAnnotationError, match=r"outermost.*field 'iters' of Solver"):
        module.Solver(jnp.ones(2))


NOT_YET_DEFINED_AROUND_STATIC = """
import jax_dataclasses as jdc

@DECORATE
class Undecided:
    x: NotYetDefined[jdc.Static[int]]
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_undefined_name_around_static_is_an_error_at_definition(spelling: str) -> None:
    with pytest.raises(jdc.StaticAnnotationError, match=r"cannot tell.*field 'x' of Undecided"):
        define(NOT_YET_DEFINED_AROUND_STATIC, spelling)


PEP695_ALIAS_LATER = """
import jax
import jax_dataclasses as jdc

@DECORATE
class Solver:
    x: jax.Array
    iters: Iters = 3

type Iters = jdc.Static[int]
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="`type` statements need Python 3.12+")
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_type_statement_after_the_class_makes_it_static_at_its_first_use(spelling: str) -> None:
    module = define(PEP695_ALIAS_LATER, spelling)
    assert len(jax.tree.leaves(module.Solver(jnp.ones(2)))) == 1
    assert statics(module.Solver) == ("iters",)


LATER_CLASS_SETTLES = """
import dataclasses
import jax
import jax_dataclasses as jdc

@DECORATE
class Tree:
    value: jax.Array
    children: tuple[Node, ...] = ()

@DECORATE
class Leafy(Tree):
    extra: Node = None

class Node:
    pass
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_later_class_settles_at_first_use_and_the_class_works_as_any(spelling: str) -> None:
    module = define(LATER_CLASS_SETTLES, spelling)
    std = define(LATER_CLASS_SETTLES, spelling, "@dataclasses.dataclass(frozen=True)")
    assert "settle" in inspect.getsource(module.Tree.__init__)
    tree = module.Leafy(jnp.ones(2), (module.Tree(jnp.zeros(1)),))
    leaves, treedef = jax.tree.flatten(tree)
    rebuilt = jax.tree.unflatten(treedef, [leaf + 1 for leaf in leaves])
    assert rebuilt.value.tolist() == [2.0, 2.0] and rebuilt.children[0].value.tolist() == [1.0]
    assert children(module.Leafy) == ("value", "children", "extra")
    # Settled: the generated `__init__` no longer settles (flatten neither: the same code).
    assert "settle" not in inspect.getsource(module.Tree.__init__)
    hints = typing.get_type_hints(module.Leafy.__init__)
    assert hints == typing.get_type_hints(std.Leafy.__init__) | {
        "children": tuple[module.Node, ...],
        "extra": module.Node,
    }


RECURSIVE = """
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Node:
    value: jax.Array
    children: tuple[Node, ...] = ()
    parent: Node | None = None
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_recursive_class_is_decided_at_once(spelling: str) -> None:
    """Its own name means the class (bound once the decorator returns): nothing to read again
    at its first use."""
    node = define(RECURSIVE, spelling).Node
    assert "settle" not in inspect.getsource(node.__init__)
    pending = define(UNPICKLED_BEFORE_ITS_FIRST_USE, "future import").Solver
    assert "settle" in inspect.getsource(pending.__init__)  # What the first assert looks for.
    tree = node(jnp.ones(1), (node(jnp.zeros(2)),))
    assert [leaf.shape for leaf in jax.tree.leaves(tree)] == [(1,), (2,)]


JIT_LATER = """
import jax
import jax_dataclasses as jdc

@jdc.jit
def scale(x: jax.Array, factor: Factor) -> jax.Array:
    return x * factor

@jdc.jit
def shift(x: jax.Array, by: Offset) -> jax.Array:
    return x + by

Factor = jdc.Static[int]

class Offset:
    pass
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_jit_parameters_named_before_their_alias_are_decided_at_the_first_call(
    spelling: str,
) -> None:
    module = define(JIT_LATER, spelling)
    with pytest.raises(jdc.StaticAnnotationError, match=r"parameter 'factor' of scale"):
        module.scale(jnp.ones(1), 2)
    assert module.shift(jnp.ones(1), 2.0).tolist() == [3.0]  # A class: an ordinary argument.


MIXIN_CHECKER_ONLY = """
from typing import TYPE_CHECKING, Annotated
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc
if TYPE_CHECKING:
    from collections import OrderedDict as OnlyForCheckers

@DECORATE
class Image(jdc.EnforcedAnnotationsMixin):
    pixels: Annotated[jax.Array, (3, 4), jnp.floating]
    meta: OnlyForCheckers = None
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_deprecated_mixin_reads_its_annotations_beside_checker_only_names(
    spelling: str,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = define(MIXIN_CHECKER_ONLY, spelling)
    assert module.Image(jnp.zeros((3, 4))).get_batch_axes() == ()
    with pytest.raises(jdc.AnnotationMismatchError, match="field 'pixels' of Image"):
        module.Image(jnp.zeros((3, 5)))


SLOTS_SUPER = """
import dataclasses
import jax
import jax_dataclasses as jdc

@DECORATE
class Base:
    x: jax.Array

@SLOTS
class Child(Base):
    y: jax.Array

    def __init__(self, x, y):
        super().__init__(x)
        object.__setattr__(self, "y", y)  # As a frozen dataclass's own __init__ must.
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_slots_subclass_with_its_own_init_may_call_zero_argument_super(spelling: str) -> None:
    """Python 3.14's `dataclasses` mends `super()` in the `slots=True` copy of a class (through
    our wrappers too); earlier ones do not, for the standard library either."""
    outcomes = []
    for decorator, slots in [
        ("@jdc.pytree_dataclass", "@jdc.pytree_dataclass(slots=True)"),
        ("@dataclasses.dataclass(frozen=True)", "@dataclasses.dataclass(frozen=True, slots=True)"),
    ]:
        module = define(SLOTS_SUPER.replace("@SLOTS", slots), spelling, decorator)
        try:
            child = module.Child(jnp.ones(1), jnp.zeros(1))
        except TypeError as error:
            outcomes.append(type(error))
        else:
            outcomes.append(None)
            assert child.x.tolist() == [1.0] and child.y.tolist() == [0.0]
    assert outcomes[0] is outcomes[1]
    if sys.version_info >= (3, 14):
        assert outcomes == [None, None]


UNPICKLED_BEFORE_ITS_FIRST_USE = """
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Solver:
    x: jax.Array
    iters: MyStatic = 3

MyStatic = jdc.Static[int]
"""


@pytest.mark.parametrize("first", ["leaves", "tree_map", "copy_and_mutate", "construct"])
def test_the_first_use_runs_the_decided_code(first: str) -> None:
    """The function that decides runs the code it has once decided: an instance made without
    `__init__` (as pickle makes one, in a process where the class was never used) is flattened
    as decided the first time too, and the first construction checks the new static field."""
    module = define(UNPICKLED_BEFORE_ITS_FIRST_USE, "future import")
    solver = object.__new__(module.Solver)
    object.__setattr__(solver, "x", jnp.ones(2))
    object.__setattr__(solver, "iters", 3)
    if first == "leaves":
        assert len(jax.tree.leaves(solver)) == 1
    elif first == "tree_map":
        assert jax.tree.map(lambda x: x * 2, solver).iters == 3
    elif first == "copy_and_mutate":
        with jdc.copy_and_mutate(solver) as copy:
            copy.x = jnp.zeros(2)
        assert copy.iters == 3
    else:
        with pytest.warns(jdc.StaticFieldWarning, match="static field 'iters' of Solver"):
            module.Solver(jnp.ones(2), iters=[1, 2])
    assert statics(module.Solver) == ("iters",)


READERS: dict[str, Callable[[Any], object]] = {
    # Each gives what it read of `iters`: the static value 3 when it was decided static.
    "register_export": lambda solver: (
        jdc.register_export(
            type(solver), f"{type(solver).__module__}.Solver", static_codecs={"iters": (int, int)}
        )
        and 3
    ),  # It refuses a codec for a field that is not static.
    "partition_specs": lambda solver: jdc.partition_specs(solver).iters,
    "trainable": lambda solver: jdc.trainable(solver).iters,
    "v1_6_layout": lambda solver: len(jdc.v1_6_layout(solver)) + 2,  # [x]; [x, iters] if not
}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_of_the_declarations_gets_them_decided(reader: str) -> None:
    """The first use of a class may be a reader of its declarations, on an instance made
    without `__init__` (as pickle makes one): it reads them decided."""
    module = define(UNPICKLED_BEFORE_ITS_FIRST_USE, "future import")
    solver = object.__new__(module.Solver)
    object.__setattr__(solver, "x", jnp.ones(2))
    object.__setattr__(solver, "iters", 3)
    assert READERS[reader](solver) == 3


@pytest.mark.subprocess
def test_a_class_pickled_by_value_before_its_first_use_is_decided_where_it_is_loaded(
    tmp_path: pathlib.Path,
) -> None:
    """cloudpickle pickles its `__init__` (still deciding) before its record (which decides,
    and carries the decided `__init__`, which the pickled one calls where it is loaded)."""
    cloudpickle = pytest.importorskip("cloudpickle")
    module = define(UNPICKLED_BEFORE_ITS_FIRST_USE, "future import")
    cloudpickle.register_pickle_by_value(module)  # As for `__main__` or a notebook.
    (tmp_path / "solver.pkl").write_bytes(cloudpickle.dumps(module.Solver))
    cloudpickle.unregister_pickle_by_value(module)
    load = """
import pickle, sys, warnings
import jax, jax.numpy as jnp
import jax_dataclasses as jdc
solver = pickle.loads(open(sys.argv[1], "rb").read())
print(len(jax.tree.leaves(solver(jnp.ones(2)))), solver(jnp.ones(2), 4).iters)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    solver(jnp.ones(2), iters=[1, 2])
print([w.category.__name__ for w in caught])
"""
    output = run_python(["-c", load, str(tmp_path / "solver.pkl")])
    assert output.split("\n")[:2] == ["1 4", "['StaticFieldWarning']"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_later_local_named_like_a_global_is_the_local(spelling: str) -> None:
    """By Python's scopes `Count` and `AXIS` in the class are the function's locals, bound
    after the class: the module's of the same names must decide neither the static field nor
    the sharding axis (3.14 reads the locals)."""
    module = define(
        """
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

Count = int
AXIS = "data"

def make():
    @jdc.pytree_dataclass
    class Model:
        x: "jdc.Sharded[jax.Array, AXIS]"
        n: "Count" = 3

    Count = jdc.Static[int]
    AXIS = "model"
    return Model(jnp.ones(2))
""",
        spelling,
    )
    model = module.make()
    assert statics(type(model)) == ("n",)
    assert jdc.partition_specs(model).x == jax.sharding.PartitionSpec("model")


@pytest.mark.subprocess
def test_a_decided_treedef_unflattens_before_the_classs_first_use(tmp_path: pathlib.Path) -> None:
    """A treedef pickled where the class was used carries the decided static value; the
    first use where it is loaded may be its unflatten."""
    module_name = f"later_static_{tmp_path.name}"
    source = "from __future__ import annotations\n" + UNPICKLED_BEFORE_ITS_FIRST_USE
    (tmp_path / f"{module_name}.py").write_text(source)
    program = f"""
import pickle, sys
import jax, jax.numpy as jnp
from {module_name} import Solver
if sys.argv[1] == "dump":
    print(pickle.dumps(jax.tree.structure(Solver(jnp.ones(2), 4))).hex())
else:
    solver = pickle.loads(bytes.fromhex(sys.stdin.read())).unflatten([jnp.ones(2)])
    print(solver.iters, jax.tree.leaves(solver)[0].tolist())
"""
    path = {"PYTHONPATH": str(tmp_path)}
    dumped = run_python(["-c", program, "dump"], env=path)
    loaded = run_python(["-c", program, "load"], env=path, input=dumped)
    assert loaded.split("\n")[0] == "4 [1.0, 1.0]"


@pytest.mark.parametrize("name", ["T", "Callable", "Text"])
def test_a_later_alias_named_like_a_typing_name_is_read_when_defined(name: str) -> None:
    module = define(
        f"""
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Model:
    x: jax.Array
    n: {name} = 3

{name} = jdc.Static[int]
""",
        "future import",
    )
    assert statics(module.Model) == ("n",)


def test_an_axis_name_never_defined_is_an_error_naming_the_field() -> None:
    module = define(
        """
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Model:
    w: jdc.Sharded[jax.Array, AXIS]
""",
        "future import",
    )
    with pytest.raises(jdc.ShardingDeclarationError, match=r"axes of field 'w' of Model: AXIS"):
        module.Model(jnp.ones(2))


HELPER_LIKE_NAMES = """
import dataclasses
import jax
import jax_dataclasses as jdc

@jdc.pytree_dataclass
class Odd:
    x__jdc_cls: Later
    c: int = 1
    z__jdc_dflt_c: list = dataclasses.field(default_factory=list, init=False)

class Later:
    def __repr__(self):
        return "Later()"
"""


@pytest.mark.parametrize("first", ["leaves", "keyed", "construct"])
def test_field_names_holding_a_helpers_name_are_decided_like_any(first: str) -> None:
    """A field may be named `x__jdc_cls` (only a leading `__jdc_` is reserved): the decided
    code closes over the same helpers as the code that waited for the decision."""
    module = define(HELPER_LIKE_NAMES, "future import")
    std = define(HELPER_LIKE_NAMES, "future import", "@dataclasses.dataclass(frozen=True)")
    odd = object.__new__(module.Odd)  # As pickle makes one: the first use is `first`.
    for name, value in (("x__jdc_cls", module.Later()), ("c", 1), ("z__jdc_dflt_c", [])):
        object.__setattr__(odd, name, value)
    if first == "construct":
        odd = module.Odd(module.Later())
    elif first == "leaves":
        assert len(jax.tree.leaves(odd)) == 2  # The list holds none.
    elif first == "keyed":
        paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(odd)]
        assert paths == [".x__jdc_cls", ".c"]
    assert repr(odd).replace("Odd", "") == repr(std.Odd(std.Later())).replace("Odd", "")
    assert children(module.Odd) == ("x__jdc_cls", "c", "z__jdc_dflt_c")
