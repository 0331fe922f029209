"""The suite's order: its longest tests first. With two workers, a test of several minutes
started last keeps one worker busy while the other has nothing left to run; started first,
the short tests fill in around it. The figures are those `--durations` printed on a cold run."""

# Seconds each took (a substring of the test's id), longest first.
LONGEST = (
    ("test_opinfo_gradients_hold_their_floor_and_none_is_wrong", 347),
    ("test_scenarios.py::test_corpus", 245),
    ("test_the_capped_zoo_trains_at_parity_with_cpu_eager", 224),
    ("test_the_capped_zoo_trains_at_parity_under_torch_compile", 221),
    ("test_opinfo_coverage_under_torch_compile_holds_its_floor", 117),
    ("test_module_db_coverage_holds_its_floor_and_no_module_computes_a_wrong_value", 102),
    ("test_opinfo_coverage_holds_its_floor", 71),
    ("test_torch_compile_over_a_mesh_trains_gpt2_like", 64),
    ("test_every_optimizer_steps_as_on_the_cpu", 63),
)


def pytest_collection_modifyitems(session, config, items):
    def seconds(item) -> int:
        return next((s for name, s in LONGEST if name in item.nodeid), 0)

    items.sort(key=seconds, reverse=True)  # stable: the rest keep their order
