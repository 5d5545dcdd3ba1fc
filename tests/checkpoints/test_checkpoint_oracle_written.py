"""The checkpoints oracle on real files: the oracle's generated cases
(`test_checkpoint_oracle.py`) written by the classes as they were in a fresh process, with the
real libraries (flax `to_bytes`, an orbax checkpoint, orbax in 1.6's positional layout:
`_oracle_writer.py`), and restored here into the classes as they are, through flax bytes,
orbax with `jdc.saved_layout` / `jdc.from_saved_layout`, and orbax with `jdc.v1_6_layout` /
`jdc.from_v1_6_layout`. Every leaf must equal the oracle's reference, built from the case
alone, or the restore must be refused naming every difference.

The in-memory oracle searches many cases cheaply; this one checks a few against what the
libraries really write and read (orbax's metadata, its restore into `saved_layout`'s tree,
msgpack's arrays), which the in-memory one stands in for. One process writes every case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import pytest
from helpers import run_python
from hypothesis import HealthCheck, Phase, given, settings
from test_checkpoint_oracle import (
    ORACLE,
    Change,
    changes,
    check,
    classes,
    expected,
    fixed,
    old_tree,
    target_tree,
)

import jax_dataclasses as jdc

serialization = pytest.importorskip("flax.serialization")
ocp = pytest.importorskip("orbax.checkpoint")

CASES = 12
"""Cases written, each restored through every format."""
FORMATS = ("flax", "orbax", "1.6")


def every_format_restores(change: Change) -> bool:
    """Nothing removed nor static now (1.6's layout refuses those where declared), so that
    each format restores it declared (except where an added field's value cannot be known),
    and the fields saved are in another order now, so that 1.6's layout depends on
    `v1_6_order`."""
    saved = [was for _, was in change.new_fields() if was is not None]
    return set(change.fates) <= {"kept", "renamed"} and saved != sorted(saved)


def declared(change: Change) -> Change:
    return change._replace(declared=True)


def drawn() -> list[Change]:
    """`CASES` different cases drawn by the oracle's strategy (with its fixed seed), half of
    them such that `every_format_restores`; each is restored through every format, so the
    drawn one is left out."""
    cases: list[Change] = []

    @fixed
    @settings(
        ORACLE,
        max_examples=2 * CASES,
        phases=[Phase.generate],
        # About one drawn change in nine is kept: cheap to draw, and the kind wanted.
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(changes(), changes().filter(every_format_restores).map(declared))
    def collect(change: Change, restorable: Change) -> None:
        cases.extend((change, restorable))

    collect()
    unique = list(dict.fromkeys(case._replace(format="flax") for case in cases))[:CASES]
    if len(unique) < CASES:
        raise RuntimeError(f"drew {len(unique)} different cases, not {CASES}")
    return unique


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Change], Path]:
    """The cases, and the folder `_oracle_writer.py` wrote their checkpoints into."""
    cases = drawn()
    directory = tmp_path_factory.mktemp("oracle")
    (directory / "cases.json").write_text(json.dumps([case._asdict() for case in cases]))
    run_python([str(Path(__file__).with_name("_oracle_writer.py")), str(directory)])
    return cases, directory


def restore(change: Change, path: Path, target: Any) -> Any:
    """The case's checkpoint at `path` (`<i>`), read by the real library of `change.format`."""
    if change.format == "flax":
        return serialization.from_bytes(target, path.with_suffix(".msgpack").read_bytes())
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    with ocp.StandardCheckpointer() as checkpointer:
        if change.format == "1.6":
            saved = path.with_name(f"{path.name}-orbax-1.6").absolute()
            restored = checkpointer.restore(saved, jdc.v1_6_layout(abstract))
            return jdc.from_v1_6_layout(target, restored)
        saved = path.with_name(f"{path.name}-orbax").absolute()
        layout = jdc.saved_layout(abstract, checkpointer.metadata(saved))
        return jdc.from_saved_layout(target, checkpointer.restore(saved, layout))


@pytest.mark.subprocess
@pytest.mark.filterwarnings("ignore::UserWarning")  # optax on an abstract target
@pytest.mark.parametrize("form", FORMATS)
@pytest.mark.parametrize("index", range(CASES))
def test_a_written_checkpoint_restores_to_the_reference_or_is_refused(
    written: tuple[list[Change], Path], index: int, form: str
) -> None:
    cases, directory = written
    change = cases[index]._replace(format=form)
    print(f"the case: {change}")  # Shown with a failure.
    old_class, new_class = classes(change)
    old, target = old_tree(change, old_class), target_tree(change, new_class)
    names, want = expected(change, old, target, new_class)
    check(lambda: restore(change, directory / str(index), target), names, want)
