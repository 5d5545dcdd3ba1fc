"""The rules as a value, without trees: `AxisRules(rules, mesh sizes).fit(wanted, shape)` gives
an array's spec or its problems (docs/design/sharding.md). The same rules reach users through the
tree functions, tested in test_sharding_declarations.py and test_sharding_scale_out.py; here
each rule is pinned where it is decided."""

import pytest
from jax.sharding import PartitionSpec as P

from jax_dataclasses._sharding_layouts.rules import AxisRules, Stacking, Wanted, parse_rules

SIZES = (("data", 2), ("model", 4))
FLAX_GUIDE = parse_rules([("batch", "data"), ("hidden", "model"), ("embed", None)])
LAYERS = Stacking((None,), "field 'layers' of Stack")


def fit(rules: object, sizes: object, wanted: Wanted, shape: tuple[int, ...]) -> object:
    return AxisRules(rules, sizes).fit(wanted, shape)  # type: ignore[arg-type]


class TestParse:
    def test_mappings_pairs_and_lists_of_lists_are_the_same_rules(self) -> None:
        expected = (("batch", ("data", "fsdp")), ("mlp", ("model",)), ("embed", None))
        assert parse_rules({"batch": ("data", "fsdp"), "mlp": "model", "embed": None}) == expected
        assert parse_rules([("batch", ("data", "fsdp")), ("mlp", "model"), ("embed", None)]) == (
            expected
        )
        assert parse_rules([["batch", ["data", "fsdp"]], ["mlp", "model"], ["embed", None]]) == (
            expected
        )

    @pytest.mark.parametrize("rules", [[("mlp",)], [("mlp", 3)], [[1, "model"]], "mlp", 3])
    def test_anything_else_is_refused_naming_the_rule(self, rules: object) -> None:
        with pytest.raises(TypeError, match="is not a \\(logical name, mesh axes\\) pair"):
            parse_rules(rules)


class TestFit:
    def test_logical_names_through_the_rules(self) -> None:
        wanted = Wanted((), ("embed", "hidden"))
        assert fit(FLAX_GUIDE, SIZES, wanted, (8, 16)) == (P(None, "model"), ())

    def test_stacked_axes_come_first_and_go_through_the_rules(self) -> None:
        stages = Stacking(("stage",), "field 'stages' of Pipeline")
        wanted = Wanted((stages, LAYERS), ("hidden", "embed"))
        rules = (*FLAX_GUIDE, ("stage", ("data",)))
        assert fit(rules, SIZES, wanted, (2, 3, 16, 8)) == (P("data", None, "model", None), ())

    def test_a_default_follows_the_stacked_axes_as_given(self) -> None:
        assert fit(FLAX_GUIDE, SIZES, Wanted((LAYERS,), None, P()), (3, 4)).spec == P(None)
        assert fit(FLAX_GUIDE, SIZES, Wanted((), None, P("data")), (4, 4)).spec == P("data")

    def test_a_rule_whose_mesh_axes_are_taken_falls_back(self) -> None:
        rules = parse_rules([("heads", "model"), ("kv", "model"), ("kv", "data")])
        assert fit(rules, SIZES, Wanted((), ("heads", "kv")), (4, 4)).spec == P("model", "data")

    def test_without_a_mesh_a_name_no_rule_covers_is_a_mesh_axis(self) -> None:
        assert fit(FLAX_GUIDE, None, Wanted((), ("fsdp",)), (3,)) == (P("fsdp"), ())


class TestProblems:
    def problem(self, wanted: Wanted, shape: tuple[int, ...], rules: object = FLAX_GUIDE) -> str:
        _, problems = fit(rules, SIZES, wanted, shape)  # type: ignore[misc]
        assert len(problems) == 1, problems
        return str(problems[0])

    def test_a_close_name_is_suggested_and_no_rule_is_blamed(self) -> None:
        text = self.problem(Wanted((), ("embed", "hiden")), (8, 16))
        assert text == (
            "the logical axis 'hiden' is neither in the rules nor a mesh axis: did you mean "
            "'hidden'? Otherwise add a rule for it (rules={'hiden': 'model'}, or None to "
            "replicate), or use a mesh axis ('data', 'model')."
        )
        assert self.problem(Wanted((), ("modle",)), (8,), rules=None).startswith(
            "shards along 'modle', which the mesh does not have: did you mean 'model'? Otherwise "
            "use its axes ('data', 'model'), or give rules that map the name to them."
        )

    def test_a_mesh_axis_the_mesh_lacks_names_the_rule_that_gave_it(self) -> None:
        rules = parse_rules({"hidden": "tp"})
        assert self.problem(Wanted((), ("hidden",)), (8,), rules).startswith(
            "shards along 'tp' (the rule for 'hidden'), which the mesh does not have. Use its axes"
        )

    def test_a_dimension_the_mesh_does_not_divide_names_its_rule(self) -> None:
        text = self.problem(Wanted((), ("embed", "hidden")), (8, 6))
        assert (
            "dimension 1 has size 6, which the mesh axes 'model' (4) (the rule for 'hidden')"
            in (text)
        )

    def test_an_array_without_its_stacked_axis_names_the_stacking_field(self) -> None:
        text = self.problem(Wanted((LAYERS,), ("embed", "hidden")), (8, 16))
        assert text.startswith(
            "has rank 2 (the 2 axes it declares), but field 'layers' of Stack stacks it along "
            "1 axis (None,) in front: the array is not stacked."
        )

    def test_the_rank_hint_offers_stacking_where_the_array_has_more_dimensions(self) -> None:
        holders = (("field 'layers' of Stack", "Block"),)
        text = self.problem(Wanted((), ("embed", "hidden"), holders=holders), (2, 8, 16))
        assert "declare the 1 axis of the stack on the field that holds it: field 'layers' of " \
            "Stack (Sharded[Block, None])" in text  # fmt: skip
        assert ", None]" not in self.problem(Wanted((), ("embed", "hidden", "batch")), (8, 16))

    def test_a_stacked_array_with_the_wrong_rank_counts_both(self) -> None:
        text = self.problem(Wanted((LAYERS,), ("embed", "hidden")), (2, 8, 16, 4))
        assert "declares 2 axes ('embed', 'hidden'), and field 'layers' of Stack stacks it along " \
            "1 axis (None,) in front: 3 in all, for an array of rank 4" in text  # fmt: skip

    def test_a_name_on_a_stacked_and_a_layer_dimension(self) -> None:
        stacked = Stacking(("hidden",), "field 'layers' of Stack")
        text = self.problem(Wanted((stacked,), ("embed", "hidden")), (2, 8, 16))
        assert text.startswith("names the axis 'hidden' on several dimensions (stacked by field")

    def test_an_array_whose_size_along_a_stacked_axis_is_not_the_stacks(self) -> None:
        stacked = Stacking(("layers",), "field 'layers' of Stack", (4,))
        rules = (*FLAX_GUIDE, ("layers", ("model",)))
        assert fit(rules, SIZES, Wanted((stacked,), None), (4, 8)) == (P("model"), ())
        text = self.problem(Wanted((stacked,), None), (8,), rules)
        assert text.startswith(
            "has size 8 along the 1 axis ('layers',) that field 'layers' of Stack stacks it "
            "along, where the stack's arrays have 4: it is not one of the stack's layers"
        )
        assert "Move it out of the stacked class" in text
