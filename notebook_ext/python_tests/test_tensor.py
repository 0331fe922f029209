"""Tensor ops from Python against NumPy."""

import numpy as np
import pytest

import xlaprof as xp

RNG = np.random.default_rng(7)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(t, expected, tol=1e-5):
    np.testing.assert_allclose(t.numpy(), expected, rtol=tol, atol=tol)


def test_numpy_round_trip_keeps_dtype_and_values():
    for dtype in [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.bool_, np.float16]:
        a = (RNG.standard_normal((3, 4)) * 10).astype(dtype)
        t = xp.from_numpy(a)
        assert t.dtype == np.dtype(dtype).name
        assert t.shape == (3, 4)
        out = t.numpy()
        assert out.dtype == a.dtype
        np.testing.assert_array_equal(out, a)


def test_non_contiguous_arrays_are_read_in_logical_order():
    a = arr(4, 6)[:, ::2].T
    np.testing.assert_array_equal(xp.from_numpy(a).numpy(), a)


def test_tensor_follows_torch_defaults():
    assert xp.tensor([1.0, 2.0]).dtype == "float32"
    assert xp.tensor([1, 2]).dtype == "int64"
    assert xp.tensor(np.zeros(2)).dtype == "float64"
    assert xp.tensor([1, 2], dtype="float64").dtype == "float64"
    assert xp.tensor([1.5], dtype=xp.bfloat16).dtype == "bfloat16"
    np.testing.assert_array_equal(np.asarray(xp.tensor([[1, 2]])), [[1, 2]])
    # A dtype asked for is made from the Python floats themselves, not from their float32
    # rounding (as torch.tensor([0.1], dtype=torch.float64) is exactly 0.1).
    np.testing.assert_array_equal(xp.tensor([0.1, 1 / 3], dtype="float64").numpy(), [0.1, 1 / 3])


def test_creation():
    close(xp.zeros(2, 3), np.zeros((2, 3)))
    close(xp.ones((2, 3)), np.ones((2, 3)))
    close(xp.full([2], 7.5), [7.5, 7.5])
    np.testing.assert_array_equal(xp.arange(5).numpy(), np.arange(5))
    close(xp.arange(0, 1, 0.25), np.arange(0, 1, 0.25))
    close(xp.eye(3), np.eye(3))
    r = xp.rand(1000, seed=3).numpy()
    assert r.min() >= 0 and r.max() < 1 and 0.4 < r.mean() < 0.6
    n = xp.randn(4000, seed=4).numpy()
    assert abs(n.mean()) < 0.1 and 0.9 < n.std() < 1.1
    assert not np.array_equal(xp.randn(8, seed=5).numpy(), xp.randn(8, seed=6).numpy())


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: a + 2.5,
        lambda a, b: 2.5 - a,
        lambda a, b: 3.0 * a,
        lambda a, b: 1.0 / (a * a + 1),
        lambda a, b: abs(a) ** 1.5,
        lambda a, b: -a,
    ],
)
def test_arithmetic_with_broadcasting(op):
    a, b = arr(3, 4), arr(4) + 3.0
    close(op(xp.from_numpy(a), xp.from_numpy(b)), op(a, b), tol=1e-4)


def test_unary_functions():
    a = arr(5, 3)
    t = xp.from_numpy(a)
    close(t.exp(), np.exp(a), 1e-5)
    close(t.abs().log(), np.log(np.abs(a)), 1e-5)
    close(t.abs().sqrt(), np.sqrt(np.abs(a)), 1e-5)
    close(t.tanh(), np.tanh(a))
    close(t.sigmoid(), 1 / (1 + np.exp(-a)))
    close(t.relu(), np.maximum(a, 0))
    close(t.sin(), np.sin(a))
    close(t.clamp(-0.5, 0.5), np.clip(a, -0.5, 0.5))
    close(t.maximum(0.1), np.maximum(a, 0.1))


def test_comparisons_and_where():
    a, b = arr(4, 4), arr(4, 4)
    ta, tb = xp.from_numpy(a), xp.from_numpy(b)
    np.testing.assert_array_equal((ta > tb).numpy(), a > b)
    np.testing.assert_array_equal((ta <= 0.0).numpy(), a <= 0.0)
    np.testing.assert_array_equal((ta == ta).numpy(), np.ones((4, 4), bool))
    close(xp.where(ta > tb, ta, tb), np.where(a > b, a, b))
    np.testing.assert_array_equal(((ta > 0) & (tb > 0)).numpy(), (a > 0) & (b > 0))
    np.testing.assert_array_equal((~(ta > 0)).numpy(), ~(a > 0))


def test_reductions():
    a = arr(3, 4, 5)
    t = xp.from_numpy(a)
    close(t.sum(), a.sum(), 1e-4)
    close(t.sum(1), a.sum(1), 1e-4)
    close(t.sum((0, 2), keepdim=True), a.sum((0, 2), keepdims=True), 1e-4)
    close(t.mean(-1), a.mean(-1))
    close(t.max(0).values, a.max(0))
    close(t.min(), a.min())
    close(t.var(1), a.var(1, ddof=1), 1e-4)
    np.testing.assert_array_equal(t.argmax(2).numpy(), a.argmax(2))
    close(t.logsumexp(2), np.log(np.exp(a).sum(2)), 1e-5)
    assert abs(t.sum().item() - float(a.sum())) < 1e-3


def test_the_extremes_of_bools_start_from_false_and_true():
    # A maximum of bools once started from -inf cast to bool, which is true: a row of all False
    # had the maximum True and its index past the row (found by the index check, in cumprod's
    # gradient, which looks for each row's first zero).
    a = np.array([[False, True, False], [False, False, False], [True, True, True]])
    t = xp.from_numpy(a)
    np.testing.assert_array_equal(t.amax(1).numpy(), a.max(1))
    np.testing.assert_array_equal(t.amin(1).numpy(), a.min(1))
    np.testing.assert_array_equal(t.argmax(1).numpy(), a.argmax(1))
    np.testing.assert_array_equal(t.argmin(1).numpy(), a.argmin(1))
    assert t.max().item() == 1 and xp.from_numpy(a[1]).max().item() == 0


def test_matmul_softmax_and_movement():
    a, b = arr(2, 3, 4), arr(4, 5)
    ta, tb = xp.from_numpy(a), xp.from_numpy(b)
    close(ta @ tb, a @ b, 1e-4)
    close(ta.matmul(tb), a @ b, 1e-4)
    e = np.exp(a - a.max(-1, keepdims=True))
    close(ta.softmax(-1), e / e.sum(-1, keepdims=True))
    close(ta.reshape(6, 4), a.reshape(6, 4))
    close(ta.reshape((-1,)), a.reshape(-1))
    close(ta.permute(2, 0, 1), a.transpose(2, 0, 1))
    close(ta.transpose(0, 2), a.swapaxes(0, 2))
    close(tb.T, b.T)
    close(ta.unsqueeze(1), a[:, None])
    close(ta.flatten(), a.reshape(-1))
    close(xp.cat([ta, ta], 1), np.concatenate([a, a], 1))
    close(xp.stack([tb, tb], 0), np.stack([b, b]))
    close(tb.flip([0]), b[::-1])
    close(tb.pad([(1, 0), (0, 2)], 9.0), np.pad(b, [(1, 0), (0, 2)], constant_values=9.0))


def test_indexing():
    a = arr(4, 5, 6)
    t = xp.from_numpy(a)
    for key in [0, -1, (1, 2), slice(1, 3), (slice(None), 0), (Ellipsis, 1), (None, 2),
                (slice(0, 4, 2), slice(None), -2), (1, Ellipsis, slice(2, 5))]:
        close(t[key], a[key])
    idx = np.array([3, 0, 3])
    close(t[xp.from_numpy(idx)], a[idx])
    with pytest.raises(IndexError):
        t[4]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]


def test_integer_ops_promote_like_torch():
    i = xp.tensor([1, 2, 3])
    assert (i + 1).dtype == "int64"
    assert (i * 0.5).dtype == "float32"
    close(i / 2, np.array([0.5, 1.0, 1.5]))
    assert i.to("float64").dtype == "float64"
    assert i.to(np.int32).dtype == "int32"


def test_bitwise_operators_on_integers_and_bools_are_numpys():
    a, b = np.array([5, -3, 12, 0]), np.array([3, 6, 10, -1])
    ta, tb = xp.tensor(a), xp.tensor(b)
    for got, want in [(ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b), (~ta, ~a), (ta & 6, a & 6),
                      (ta.bitwise_xor(tb), a ^ b), (ta.bitwise_not(), ~a)]:
        np.testing.assert_array_equal(got.numpy(), want)
    m = np.array([True, False, True])
    tm = xp.tensor(m)
    for got, want in [(~tm, ~m), (tm ^ True, m ^ True), (tm & tm, m & m), (tm | ~tm, m | ~m)]:
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(Exception, match="bitwise"):
        xp.tensor(np.ones(2, np.float32)).bitwise_and(xp.tensor(np.ones(2, np.float32)))


def test_item_and_python_numbers():
    t = xp.tensor([[2.5]])
    assert t.item() == 2.5
    assert float(t) == 2.5
    assert int(xp.tensor([3])) == 3
    assert bool(xp.tensor([1.0]) > 0)
    assert xp.tensor([1, 2]).tolist() == [1, 2]
    assert len(xp.zeros(3, 2)) == 3


def test_int_keeps_every_digit_of_an_int64():
    big = 2**60 + 1
    assert int(xp.tensor([big])) == big
    assert int(xp.tensor([-2.7])) == -2


def test_sort_is_numpys_stable_sort_with_its_gradient():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, (4, 7)).astype(np.float32)  # ties: stability shows
    a[1, 3] = np.nan
    for dim in (0, 1, -1):
        values, indices = xp.tensor(a).sort(dim)
        want = np.argsort(a, axis=dim, kind="stable")
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, axis=dim))
    values, indices = xp.tensor(a[0]).sort(descending=True)
    assert list(values.numpy()) == sorted(a[0], reverse=True)
    # The gradient of the sorted values lands where each value came from.
    x = xp.tensor(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    v, i = x.sort(1)
    (v * xp.tensor(w)).sum().backward()
    expected = np.zeros_like(w)
    np.put_along_axis(expected, i.numpy(), w, axis=1)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_random_values_of_an_empty_shape_are_an_empty_tensor():
    for make in (xp.rand, xp.randn):
        t = make(0, 3) * 2.0
        assert t.shape == (0, 3) and t.numpy().shape == (0, 3)
