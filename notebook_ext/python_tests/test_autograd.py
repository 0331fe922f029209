"""Autograd from Python against finite differences, and training pieces against NumPy."""

import numpy as np
import pytest

import xlaprof as xp

RNG = np.random.default_rng(11)


def finite_difference(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x * x).sum(),
        lambda x: (x @ x.T).relu().mean(),
        lambda x: x.softmax(-1).log().sum() * 0.5,
        lambda x: (x.tanh() * x.sigmoid() + x.exp() / 4).sum(),
        lambda x: x.logsumexp(1).sum(),
        lambda x: (x[1:, ::2] ** 2).sum() + x.max(0).values.sum(),
        lambda x: xp.layer_norm(x, [4]).pow(2.0).sum(),
    ],
)
def test_gradients_match_finite_differences(fn):
    x0 = RNG.standard_normal((3, 4))
    x = xp.from_numpy(x0)  # float64: finite differences stay accurate
    x.requires_grad = True
    fn(x).backward()
    analytic = x.grad.numpy()

    def value(v):
        with xp.no_grad():
            return fn(xp.from_numpy(v)).item()

    np.testing.assert_allclose(analytic, finite_difference(value, x0), rtol=1e-5, atol=1e-6)


def test_linear_and_cross_entropy_gradients():
    layer = xp.nn.Linear(5, 3, seed=1)
    x = xp.from_numpy(RNG.standard_normal((4, 5)).astype(np.float32))
    labels = xp.tensor([0, 2, 1, 2])
    loss = xp.cross_entropy(layer(x), labels)
    loss.backward()
    w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
    xv, y = x.numpy().astype(np.float64), labels.numpy()

    def ce(wv):
        z = xv @ wv.T + b
        z = z - z.max(1, keepdims=True)
        return -(z[np.arange(4), y] - np.log(np.exp(z).sum(1))).mean()

    np.testing.assert_allclose(layer.weight.grad.numpy(), finite_difference(ce, w), rtol=1e-3, atol=1e-4)


def test_no_grad_records_no_gradient():
    x = xp.tensor([1.0, 2.0], requires_grad=True)
    with xp.no_grad():
        y = (x * 3).sum()
        assert not xp.is_grad_enabled()
    assert xp.is_grad_enabled()
    assert not y.requires_grad
    with pytest.raises(xp.AutogradError):
        y.backward()


def test_sgd_step_matches_numpy():
    layer = xp.nn.Linear(3, 2, seed=2)
    opt = xp.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    w0 = layer.weight.numpy().copy()
    x = xp.tensor(RNG.standard_normal((4, 3)))
    loss = (layer(x) ** 2).mean()
    loss.backward()
    g = layer.weight.grad.numpy()
    opt.step()
    xp.step()
    np.testing.assert_allclose(layer.weight.numpy(), w0 - 0.1 * g, rtol=1e-5, atol=1e-6)


def test_training_reduces_the_loss_and_compiles_once():
    model = xp.nn.Sequential(xp.nn.Linear(8, 16, seed=3), xp.nn.ReLU(), xp.nn.Linear(16, 4, seed=4))
    opt = xp.optim.Adam(model.parameters(), lr=0.01)
    x = xp.tensor(RNG.standard_normal((32, 8)))
    y = xp.tensor(RNG.integers(0, 4, 32))
    losses = []
    with xp.profile() as p:
        for _ in range(20):
            loss = xp.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            xp.step()
            losses.append(loss)
    values = [l.item() for l in losses]
    assert values[-1] < values[0] * 0.8
    p.assert_max_compiles(0, after_step=2)
    assert len(model.parameters()) == 4
