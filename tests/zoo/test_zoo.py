"""The model zoo as the judge: a capped set of its architectures (zoo_floor.json) trains 20 AdamW
steps on the device beside CPU eager, lazily and under torch.compile(backend="xlaprof"), each held
to parity (loss within 1e-4 relative at every step, no compile after warm-up, no CPU fallback,
every compiled graph captured, as many parameters as on the CPU), and the count at parity to the
floor. Raise the floor and grow the set as models reach parity; never lower it.
The whole table: python tests/zoo/zoo.py"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))

import zoo  # noqa: E402


def test_the_capped_zoo_trains_at_parity_with_cpu_eager():
    floor = json.loads((HERE / "zoo_floor.json").read_text())
    rows = list(zoo.measure(floor["models"], floor["steps"]))
    print("\n" + zoo.table(rows))
    at_parity = [r["model"] for r in rows if zoo.at_parity(r)]
    assert len(at_parity) >= floor["at_parity"], (
        f"{len(at_parity)} models at parity, floor {floor['at_parity']}:\n{zoo.table(rows)}"
    )


def test_the_capped_zoo_trains_at_parity_under_torch_compile():
    floor = json.loads((HERE / "zoo_floor.json").read_text())
    compiled = floor["compiled"]
    rows = list(zoo.measure(compiled["models"], floor["steps"], compiled=True))
    print("\n" + zoo.table(rows))
    at_parity = [r["model"] for r in rows if zoo.at_parity(r)]
    assert len(at_parity) >= compiled["at_parity"], (
        f"{len(at_parity)} models at parity under torch.compile, floor {compiled['at_parity']}:\n{zoo.table(rows)}"
    )
