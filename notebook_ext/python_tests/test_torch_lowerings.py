"""The torch bridge's lowerings package: one family module per op, one registry of properties."""

import ast
import pathlib

import pytest

torch = pytest.importorskip("torch")

import xlaprof.torch  # noqa: E402,F401  (registers every lowering)
from xlaprof.torch import _autocast, _dispatch  # noqa: E402
from xlaprof.torch.lowerings import registry  # noqa: E402

PACKAGE = pathlib.Path(registry.__file__).parent
PACKAGE_NAME = "xlaprof.torch.lowerings"
NOT_FAMILIES = {"__init__", "registry", "common"}
FAMILIES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in NOT_FAMILIES)


def test_every_registered_op_is_lowered_in_exactly_one_family(tmp_path):
    rows = []
    for kind, table in (("functional", registry.FUNCTIONAL), ("raw", registry.RAW), ("named", registry.NAMED)):
        for op in table:
            module = registry.FAMILY[op]
            if not module.startswith(PACKAGE_NAME + "."):
                # A test's own lowering of an op of its own (`test_debug_tools`).
                assert not str(op).startswith("aten."), (op, module)
                continue
            rows.append((str(op), kind, module[len(PACKAGE_NAME) + 1:]))
    table_file = tmp_path / "op_families.tsv"
    table_file.write_text("".join(f"{op}\t{kind}\t{family}\n" for op, kind, family in sorted(rows)))

    lines = table_file.read_text().splitlines()
    ops = [line.split("\t")[0] for line in lines]
    assert len(ops) == len(set(ops)), "an op registered in two tables"
    assert len(ops) == len([op for op in registry.FAMILY if registry.FAMILY[op].startswith(PACKAGE_NAME + ".")])
    assert set(registry.FAMILY) == set(registry.FUNCTIONAL) | set(registry.RAW) | set(registry.NAMED)
    families = {line.split("\t")[2] for line in lines}
    assert families <= set(FAMILIES), families - set(FAMILIES)
    assert set(FAMILIES) - families == set(), "a family module without a lowering"
    assert {"elementwise", "views", "reductions"} <= families


def _imports(path):
    """(module imported from, names) for each relative import of the package's module ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                out += [(a.name, []) for a in node.names]
            else:
                out.append((node.module, [a.name for a in node.names]))
    return out


def test_no_module_imports_private_names_and_families_form_no_cycle():
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for module, names in _imports(path):
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path.name} imports {private} from .{module}"
        # Families import the registry, `common` and (where a lowering calls another) other
        # families' public names; never the reverse of a family that imports them.
        graph[path.stem] = {m for m, _ in _imports(path) if m in FAMILIES}
    for shared in ("registry", "common"):
        assert graph[shared] == set(), f"{shared} imports a family"

    visiting, done = set(), set()

    def visit(module, trail):
        if module in done:
            return
        assert module not in visiting, "an import cycle: " + " -> ".join(trail + [module])
        visiting.add(module)
        for dep in sorted(graph.get(module, ())):
            visit(dep, trail + [module])
        visiting.discard(module)
        done.add(module)

    for family in FAMILIES:
        visit(family, [])


def test_the_consumers_read_each_property_from_the_registry():
    aten = torch.ops.aten
    # Complex safety: what `_dispatch` checks is the registry's set, filled by `complex_safe=`.
    assert _dispatch.COMPLEX_SAFE is registry.COMPLEX_SAFE
    assert {aten.add, aten.view, aten.mm, aten.view_as_real, aten._fft_c2c} <= registry.COMPLEX_SAFE
    assert aten.maximum not in registry.COMPLEX_SAFE
    # Autocast: `_autocast`'s lists are the registry's ops of each policy, each op in one.
    for policy, names in (("lower_precision", _autocast.LOWER_PRECISION), ("float32", _autocast.FLOAT32),
                          ("widest", _autocast.WIDEST)):
        assert set(names) == {n for n, p in registry.AUTOCAST.items() if p == policy}
    assert registry.AUTOCAST["addmm"] == "lower_precision" and registry.AUTOCAST["exp"] == "float32"
    assert registry.AUTOCAST["dot"] == "widest" and registry.AUTOCAST["mv"] == "lower_precision"
    # The native dispatcher's views and operators: the registry's names, as Rust's numbers.
    codes = xlaprof._native.DISPATCH_CODES
    assert _dispatch._NATIVE_VIEWS == {op: codes["views"][n] for op, n in registry.NATIVE_VIEWS.items()}
    assert _dispatch._ENGINE_OPERATORS == {op: codes["operators"][n] for op, n in registry.ENGINE_OPERATORS.items()}
    assert set(registry.ENGINE_OPERATORS) == {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor}
    assert set(registry.NATIVE_VIEWS) <= set(registry.RAW)
    assert set(registry.ENGINE_OPERATORS) <= set(registry.FUNCTIONAL)


def test_the_registry_refuses_an_unknown_or_conflicting_autocast_policy():
    with pytest.raises(ValueError):
        registry.declare("not_an_op_xyz", autocast="float16")
    with pytest.raises(ValueError):
        registry.declare("addmm", autocast="float32")
