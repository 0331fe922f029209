"""Errors are Python exceptions that name the shapes and the Python line."""

import inspect

import numpy as np
import pytest

import xlaprof as xp


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def test_shape_error_names_shapes_and_the_python_line():
    a, b = xp.zeros(2, 3), xp.zeros(4, 5)
    with pytest.raises(xp.ShapeError) as e:
        line = this_line(); a @ b  # noqa: E702
    message = str(e.value)
    assert "f32[2,3]" in message and "f32[4,5]" in message
    assert f"test_errors.py:{line} in test_shape_error_names_shapes_and_the_python_line" in message
    assert isinstance(e.value, ValueError)


def test_broadcast_error():
    with pytest.raises(xp.ShapeError, match=r"f32\[3\] and f32\[4\] cannot be broadcast"):
        xp.zeros(3) + xp.zeros(4)


def test_errors_inside_modules_point_at_the_caller():
    layer = xp.nn.Linear(3, 2)
    with pytest.raises(xp.ShapeError) as e:
        line = this_line(); layer(xp.zeros(5, 4))  # noqa: E702
    assert f"test_errors.py:{line}" in str(e.value)


def test_item_of_many_elements():
    with pytest.raises(xp.ShapeError, match=r"one element, not f32\[2,2\]"):
        xp.zeros(2, 2).item()


def test_backward_needs_a_scalar():
    x = xp.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(xp.AutogradError, match=r"one-element tensor, but this is f32\[2\]"):
        (x * 2).backward()


def test_bad_arguments_are_type_and_value_errors():
    with pytest.raises(ValueError, match="unknown dtype"):
        xp.zeros(2, dtype="complex32")
    with pytest.raises(TypeError):
        xp.from_numpy(np.array(["a", "b"]))
    with pytest.raises(TypeError):
        xp.zeros(2) + "x"
    with pytest.raises(ValueError, match="unknown format"):
        with xp.profile() as p:
            xp.sync()
        p.export("/dev/null", format="docx")


def test_reshape_error_and_the_engine_still_works():
    with pytest.raises(xp.ShapeError, match="reshape"):
        xp.zeros(2, 3).reshape(4, 2)
    assert (xp.ones(2) * 2).sum().item() == 4.0


def test_errors_share_a_base_class():
    for cls in (xp.ShapeError, xp.AutogradError, xp.XlaError, xp.PluginError, xp.ProfileError):
        assert issubclass(cls, Exception)
    with pytest.raises(xp.ProfileError):
        xp.load("/nonexistent/file.xlaprof")


def test_argument_errors_name_the_op():
    with pytest.raises(TypeError, match="add needs a tensor, a number or an array, not str"):
        xp.zeros(2) + "x"
    with pytest.raises(TypeError, match="matmul needs a tensor, not a number"):
        2.0 @ xp.zeros(2)
    with pytest.raises(TypeError, match=r"reshape takes ints or one sequence of ints"):
        xp.zeros(4).reshape("2x2")
    with pytest.raises(TypeError, match=r"dim must be None, an int or a sequence of ints, not 'a'"):
        xp.zeros(2).sum("a")


def test_ops_on_another_thread_point_at_the_caller():
    import threading

    layer, caught = xp.nn.Sequential(xp.nn.Linear(3, 2)), []

    def run():
        try:
            caught.append(this_line()); layer(xp.zeros(5, 4))  # noqa: E702
        except xp.ShapeError as e:
            caught.append(str(e))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    line, message = caught
    assert f"test_errors.py:{line} in " in message, message


def test_every_error_is_an_xlaprof_error_and_a_builtin_one():
    assert issubclass(xp.ShapeError, xp.XlaprofError) and issubclass(xp.ShapeError, ValueError)
    for cls in (xp.AutogradError, xp.XlaError, xp.PluginError, xp.ProfileError, xp.InternalError):
        assert issubclass(cls, xp.XlaprofError) and issubclass(cls, RuntimeError), cls
    with pytest.raises(xp.XlaprofError):
        xp.zeros(3) + xp.zeros(4)


def test_pow_with_a_modulo_is_refused_both_ways():
    t = xp.ones(2)
    with pytest.raises(TypeError, match="modulo is not supported"):
        pow(t, 2.0, 5)
    with pytest.raises(TypeError, match="modulo is not supported"):
        t.__rpow__(2.0, 5)  # what pow(2.0, t, 5) calls from Python 3.14 on
