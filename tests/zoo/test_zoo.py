"""The model zoo as the judge: a capped set of its architectures (zoo_floor.json) trains 20 AdamW
steps on the device beside CPU eager, each held to parity (loss within 1e-4 relative at every
step, no compile after warm-up, no CPU fallback, as many parameters as on the CPU), and the count
at parity to the floor. Raise the floor and grow the set as models reach parity; never lower it.
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
