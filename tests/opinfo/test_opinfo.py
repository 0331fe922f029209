"""PyTorch's OpInfo database on the xlaprof device: a capped sweep (the first sample of every
float32 OpInfo, and of every multi-tensor `torch._foreach_*` OpInfo; the float32 ones again under
torch.compile(backend="xlaprof"), and differentiated: their gradients against the CPU's) held
to the floor in opinfo_floor.json; and its ModuleInfo
database (`module_sweep.py`: each module moved to the device, a forward and a backward against
the CPU, the first sample of each, lazily and under torch.compile) and its OptimizerInfo
database (`optim_sweep.py`: five steps of every optimizer against the CPU, in each of its
settings and implementations; ``"settings": null`` in the floor is all of them). Raise the
floor as coverage grows; never lower it. The whole sweeps print their tables:
python tests/opinfo/opinfo_sweep.py, module_sweep.py, optim_sweep.py"""

import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))

import module_sweep  # noqa: E402
import opinfo_sweep  # noqa: E402
import optim_sweep  # noqa: E402


def test_opinfo_coverage_holds_its_floor():
    floor = json.loads((HERE / "opinfo_floor.json").read_text())
    results = opinfo_sweep.sweep(samples=floor["samples"], dtype_name="float32")
    print("\n" + opinfo_sweep.table(results))
    outcomes = [o for o, _ in results.values()]
    crashed = sorted(name for name, (o, _) in results.items() if o == "crash")
    assert not crashed, f"OpInfos that killed the process: {crashed}"
    native = outcomes.count("passed")
    with_fallback = native + outcomes.count("fallback")
    assert len(results) >= floor["opinfos"], f"only {len(results)} OpInfos ran"
    assert native >= floor["native"], f"{native} OpInfos pass natively, floor {floor['native']}"
    assert with_fallback >= floor["with_fallback"], (
        f"{with_fallback} OpInfos pass with the CPU fallback, floor {floor['with_fallback']}"
    )


def test_foreach_opinfo_coverage_holds_its_floor():
    floor = json.loads((HERE / "opinfo_floor.json").read_text())["foreach"]
    results = opinfo_sweep.sweep(samples=floor["samples"], dtype_name="float32", db="foreach")
    print("\n" + opinfo_sweep.table(results))
    native = [name for name, (o, _) in results.items() if o == "passed"]
    others = {name: outcome for name, outcome in results.items() if outcome[0] != "passed"}
    assert len(results) >= floor["opinfos"], f"only {len(results)} foreach OpInfos ran"
    assert len(native) >= floor["native"], f"{len(native)} pass natively, floor {floor['native']}: {others}"


def test_opinfo_coverage_under_torch_compile_holds_its_floor():
    floor = json.loads((HERE / "opinfo_floor.json").read_text())["compiled"]
    results = opinfo_sweep.sweep(samples=floor["samples"], dtype_name="float32", compiled=True)
    print("\n" + opinfo_sweep.table(results))
    outcomes = [o for o, _ in results.values()]
    crashed = sorted(name for name, (o, _) in results.items() if o == "crash")
    assert not crashed, f"OpInfos that killed the process: {crashed}"
    native = outcomes.count("passed")
    assert len(results) >= floor["opinfos"], f"only {len(results)} OpInfos ran"
    assert native >= floor["native"], f"{native} OpInfos pass natively compiled, floor {floor['native']}"
    assert native + outcomes.count("fallback") >= floor["with_fallback"]


def test_opinfo_gradients_hold_their_floor_and_none_is_wrong():
    # The backward ops training runs, which no forward reaches. A gradient that differs from the
    # CPU's fails the test, but for the OpInfos the floor names (`differ`), whose samples the
    # device cannot compute as the CPU does: they draw random numbers, which the device draws
    # otherwise (dropout in attention, fractional pooling's offsets), address storage outside
    # their view (`as_strided` of a partial view), or take float32 subnormals, which XLA's CPU
    # code flushes to zero (`frexp` of 1e-40).
    floor = json.loads((HERE / "opinfo_floor.json").read_text())["grad"]
    results = opinfo_sweep.sweep(samples=floor["samples"], dtype_name="float32", grad=True)
    print("\n" + opinfo_sweep.table(results))
    wrong = {name: why for name, (o, why) in results.items()
             if o in ("mismatch", "dtype", "crash") and name not in floor["differ"]}
    assert not wrong, f"OpInfos whose gradients differ from the CPU's: {wrong}"
    outcomes = [o for o, _ in results.values()]
    native = outcomes.count("passed")
    assert len(results) >= floor["opinfos"], f"only {len(results)} OpInfos ran"
    assert native >= floor["native"], f"{native} OpInfos' gradients pass natively, floor {floor['native']}"
    assert native + outcomes.count("fallback") >= floor["with_fallback"]


@pytest.mark.parametrize("compiled", [False, True], ids=["lazy", "compiled"])
def test_module_db_coverage_holds_its_floor_and_no_module_computes_a_wrong_value(compiled):
    floor = json.loads((HERE / "opinfo_floor.json").read_text())["modules_compiled" if compiled else "modules"]
    results = module_sweep.sweep(samples=floor["samples"], compiled=compiled)
    print("\n" + module_sweep.table(results))
    wrong = {name: why for name, (o, why) in results.items() if o in ("mismatch", "dtype", "crash")}
    assert not wrong, f"ModuleInfos whose outputs, gradients or parameters differ from the CPU's: {wrong}"
    outcomes = [o for o, _ in results.values()]
    native = outcomes.count("passed")
    assert len(results) >= floor["moduleinfos"], f"only {len(results)} ModuleInfos ran"
    assert native >= floor["native"], f"{native} ModuleInfos pass natively, floor {floor['native']}"
    assert native + outcomes.count("fallback") >= floor["with_fallback"]


def test_every_optimizer_steps_as_on_the_cpu():
    floor = json.loads((HERE / "opinfo_floor.json").read_text())["optimizers"]
    results = optim_sweep.sweep(settings=floor["settings"])
    print("\n" + optim_sweep.table(results))
    wrong = {name: why for name, (o, why) in results.items() if o in ("mismatch", "crash")}
    assert not wrong, f"optimizers whose parameters differ from the CPU's: {wrong}"
    native = [name for name, (o, _) in results.items() if o == "passed"]
    assert len(results) >= floor["optimizers"], f"only {len(results)} optimizers ran"
    assert len(native) >= floor["native"], f"{len(native)} pass natively, floor {floor['native']}: {results}"
