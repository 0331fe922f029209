"""The type stubs cover the extension: every public name, and every Tensor method."""

import ast
import pathlib

import xlaprof
from xlaprof import _native

STUB = pathlib.Path(xlaprof.__file__).with_name("_native.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    top, classes = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        if isinstance(node, ast.AnnAssign):  # a constant: `DISPATCH_CODES: Dict[...]`
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef)
            } | {t.target.id for t in node.body if isinstance(t, ast.AnnAssign)}
    return top, classes


def test_every_native_name_has_a_stub():
    top, _ = stub_names()
    runtime = {n for n in dir(_native) if not n.startswith("__")}
    assert runtime - top == set()


def test_every_method_has_a_stub():
    _, classes = stub_names()
    for cls in ("Tensor", "Linear", "Conv2d", "LayerNorm", "Embedding", "SGD", "Adam", "_Profile"):
        runtime = {n for n in dir(getattr(_native, cls)) if not n.startswith("__") or n in ("__add__", "__matmul__", "__getitem__")}
        missing = runtime - classes[cls]
        assert missing == set(), (cls, missing)


def test_the_package_ships_its_stubs():
    assert STUB.exists() and STUB.with_name("py.typed").exists()
