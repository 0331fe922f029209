"""The PyTorch-style API against NumPy: the ops added to speak torch, and a program written as a
PyTorch user writes one, running unchanged but for the import."""

import copy
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import xlaprof as xp
import xlaprof.nn.functional as F
from xlaprof import nn

RNG = np.random.default_rng(13)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(t, expected, tol=1e-5):
    np.testing.assert_allclose(np.asarray(t), expected, rtol=tol, atol=tol)


def softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ---- ops ------------------------------------------------------------------------------------


def test_masked_fill_against_numpy():
    a = arr(3, 4)
    mask = RNG.random((3, 4)) > 0.5
    t, m = xp.from_numpy(a), xp.from_numpy(mask)
    close(t.masked_fill(m, -1.5), np.where(mask, -1.5, a))
    close(xp.masked_fill(t, m, 2.0), np.where(mask, 2.0, a))
    row = mask[:1]  # broadcasts over the rows
    close(t.masked_fill(xp.from_numpy(row), float("-inf")).softmax(-1),
          softmax(np.where(row, -np.inf, a), -1))
    close(t.masked_fill(m, xp.tensor(3.0)), np.where(mask, 3.0, a))
    i = xp.tensor([[1, 2], [3, 4]])
    assert i.masked_fill(xp.tensor([[True, False], [False, True]]), 0).tolist() == [[0, 2], [3, 0]]


def test_masked_fill_errors():
    t = xp.zeros(2, 3)
    with pytest.raises(xp.ShapeError, match="does not broadcast"):
        t.masked_fill(xp.zeros(4, 3) > 0, 1.0)
    with pytest.raises(xp.ShapeError, match="must be bool"):
        t.masked_fill(xp.zeros(2, 3), 1.0)
    with pytest.raises(xp.ShapeError, match="0-dimension"):
        t.masked_fill(xp.zeros(2, 3) > 0, xp.ones(2))
    with pytest.raises(TypeError):
        t.masked_fill(xp.zeros(2, 3) > 0, "x")


def test_softmax_and_log_softmax_against_numpy():
    a = arr(2, 3, 5)
    t = xp.from_numpy(a)
    for dim in (0, 1, -1):
        close(t.softmax(dim), softmax(a, dim))
        close(xp.softmax(t, dim), softmax(a, dim))
        close(F.softmax(t, dim=dim), softmax(a, dim))
        close(t.log_softmax(dim), np.log(softmax(a, dim)), 1e-4)
        close(F.log_softmax(t, dim), np.log(softmax(a, dim)), 1e-4)
    assert t.softmax(1, dtype="float64").dtype == "float64"
    close(nn.Softmax(dim=1)(t), softmax(a, 1))
    close(nn.LogSoftmax(dim=-1)(t), np.log(softmax(a, -1)), 1e-4)


def test_softmax_without_dim_warns_and_picks_torch_s_dim():
    a = arr(4, 5)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = F.softmax(xp.from_numpy(a))
    close(out, softmax(a, 1))
    with pytest.warns(UserWarning):
        close(F.softmax(xp.from_numpy(a[0])), softmax(a[0], 0))


def test_argmax_argmin_without_dim():
    a = arr(3, 4, 5)
    t = xp.from_numpy(a)
    assert t.argmax().item() == a.argmax()
    assert xp.argmin(t).item() == a.argmin()
    assert t.argmax().shape == ()
    assert t.argmax(keepdim=True).shape == (1, 1, 1)
    np.testing.assert_array_equal(t.argmax(1).numpy(), a.argmax(1))
    np.testing.assert_array_equal(t.argmin(dim=-1, keepdim=True).numpy(),
                                  a.argmin(-1)[..., None])
    assert t.argmax().dtype == "int64"


def test_max_and_min_as_torch_has_them():
    a = arr(3, 4)
    t = xp.from_numpy(a)
    close(t.max(), a.max())
    values, indices = t.max(1)
    close(values, a.max(1))
    np.testing.assert_array_equal(indices.numpy(), a.argmax(1))
    out = t.min(0, keepdim=True)
    close(out.values, a.min(0, keepdims=True))
    np.testing.assert_array_equal(out.indices.numpy(), a.argmin(0)[None])
    assert type(out).__name__ == "min" and out._fields == ("values", "indices")
    b = arr(3, 4)
    close(t.max(xp.from_numpy(b)), np.maximum(a, b))
    close(xp.min(t, xp.from_numpy(b)), np.minimum(a, b))
    close(xp.amax(t, (0, 1)), a.max())
    with pytest.raises(TypeError, match="amax reduces several dims"):
        t.max((0, 1))


def test_reductions_take_none_int_or_tuple_and_keepdim():
    a = arr(2, 3, 4)
    t = xp.from_numpy(a)
    for dim in (None, 1, (0, 2), -1):
        for keepdim in (False, True):
            want = a.sum(axis=dim, keepdims=keepdim)
            close(t.sum(dim, keepdim), want, 1e-4)
            close(xp.sum(t, dim=dim, keepdim=keepdim), want, 1e-4)
            close(t.mean(dim=dim, keepdim=keepdim), a.mean(axis=dim, keepdims=keepdim))
    close(t.std(1), a.std(1, ddof=1), 1e-4)
    close(t.var(1, unbiased=False), a.var(1), 1e-4)
    close(xp.std(t, (0, 1), correction=0, keepdim=True), a.std((0, 1), keepdims=True), 1e-4)
    assert t.sum(dtype="float64").dtype == "float64"
    mask = xp.from_numpy(a > 0)
    assert mask.sum().dtype == "int64" and mask.sum().item() == (a > 0).sum()
    assert xp.tensor([1, 2, 3], dtype="int32").sum().dtype == "int64"


def test_dtype_conversions():
    a = (arr(2, 3) * 10)
    t = xp.from_numpy(a)
    for method, dtype in [("double", np.float64), ("float", np.float32), ("half", np.float16),
                          ("long", np.int64), ("int", np.int32), ("byte", np.uint8),
                          ("char", np.int8), ("bool", np.bool_)]:
        out = getattr(t, method)()
        assert out.dtype == np.dtype(dtype).name, method
        if dtype in (np.float64, np.float32, np.float16):
            close(out.to("float32"), a.astype(dtype).astype(np.float32), 1e-2)
        elif dtype is np.bool_:
            np.testing.assert_array_equal(out.numpy(), a != 0)
        elif dtype is not np.uint8:
            np.testing.assert_array_equal(out.numpy(), np.trunc(a).astype(dtype))
    assert t.bfloat16().dtype == "bfloat16"
    assert t.to(xp.double).dtype == "float64" and t.to(dtype=xp.long).dtype == "int64"
    assert t.type_as(xp.tensor([1])).dtype == "int64"
    assert xp.float == "float32" and xp.long == "int64" and xp.half == "float16"
    assert t.is_floating_point() and not t.long().is_floating_point()


def test_to_cpu_gives_a_computed_tensor():
    x = xp.randn(3, 4, seed=1)
    y = (x * 2).relu()
    assert y.is_pending
    host = y.to("cpu")
    assert host is y and not y.is_pending  # computed; nothing more runs to read it
    close(host.numpy(), np.maximum(x.numpy() * 2, 0))
    z = (x + 1).cpu()
    assert not z.is_pending
    w = x.to("cpu", xp.float64)
    assert w.dtype == "float64" and not w.is_pending
    assert x.to(device="cpu", dtype="float16").dtype == "float16"
    assert x.to(xp.device("cpu")) is x
    assert x.to("xla") is x
    assert x.device == "cpu" or x.device == xp.device("cuda")
    assert x.to(x.device) is x
    c = x.to("cpu", copy=True)
    assert c is not x
    close(c, x.numpy())


def test_device_arguments():
    assert xp.zeros(2, device="cpu").shape == (2,)
    assert xp.randn(2, 3, device=xp.device("xla:0")).shape == (2, 3)
    assert str(xp.device("cpu")) == "cpu" and repr(xp.device("xla", 0)) == "device(type='xla', index=0)"
    with pytest.raises(ValueError, match="unknown device"):
        xp.zeros(2, device="tpu")
    with pytest.raises(TypeError, match="device must be"):
        xp.ones(2, device=3.5)
    with pytest.raises(ValueError, match="unknown dtype"):
        xp.zeros(2).to("cpux")


def test_factories_take_torch_s_keywords():
    x = xp.randn(2, 3, requires_grad=True)
    assert x.requires_grad and x.shape == (2, 3)
    assert xp.randn((2, 3), dtype=xp.float64).dtype == "float64"
    for make in (xp.zeros, xp.ones, xp.rand):
        t = make(4, requires_grad=True, dtype="float64")
        assert t.requires_grad and t.dtype == "float64"
    assert xp.full((2,), 3).dtype == "int64" and xp.full((2,), 3.5).dtype == "float32"
    assert xp.full((2,), True).dtype == "bool"
    assert xp.full((2, 2), 1.0, requires_grad=True).requires_grad
    assert xp.arange(5).dtype == "int64" and xp.arange(5.0).dtype == "float32"
    np.testing.assert_array_equal(xp.arange(1, 10, 3).numpy(), [1, 4, 7])
    close(xp.arange(0, 1, 0.25, requires_grad=True), np.arange(0, 1, 0.25))
    close(xp.eye(2, 3), np.eye(2, 3))
    close(xp.eye(3, dtype="float64"), np.eye(3))
    close(xp.tensor([1.0, 2.0], requires_grad=True, device="cpu"), [1.0, 2.0])
    assert xp.tensor([1, 2], dtype=xp.float).dtype == "float32"
    like = xp.zeros_like(x)
    assert like.shape == x.shape and like.dtype == x.dtype and not like.requires_grad
    close(xp.full_like(x, 7.0), np.full((2, 3), 7.0))
    assert xp.ones_like(x, dtype="int64").dtype == "int64"
    assert xp.randn_like(x).shape == (2, 3) and xp.rand_like(x, requires_grad=True).requires_grad
    r = xp.randint(0, 10, (1000,)).numpy()
    assert r.dtype == np.int64 and r.min() >= 0 and r.max() <= 9 and len(set(r)) == 10
    assert xp.randint(5, (3, 2)).shape == (3, 2)
    with pytest.raises(xp.AutogradError, match="float dtype"):
        xp.zeros(2, dtype="int64", requires_grad=True)


def test_where_takes_numbers():
    a = arr(3)
    t = xp.from_numpy(a)
    close(xp.where(t > 0, t, 0.0), np.where(a > 0, a, 0.0))
    close(xp.where(t > 0, 1.0, t), np.where(a > 0, 1.0, a))
    assert xp.where(t > 0, 1, 0).dtype == "int64"


def test_movement_like_torch():
    a = arr(2, 1, 3, 1)
    t = xp.from_numpy(a)
    assert t.squeeze().shape == (2, 3)
    assert t.squeeze(1).shape == (2, 3, 1)
    assert t.squeeze(0).shape == (2, 1, 3, 1)  # not 1: unchanged, as in PyTorch
    assert t.squeeze((1, 3)).shape == (2, 3)
    assert t.flatten().shape == (6,)
    assert t.flatten(1).shape == (2, 3)
    assert t.flatten(0, 2).shape == (6, 1)
    m = xp.from_numpy(arr(2, 3))
    close(m.t(), m.numpy().T)
    assert xp.ones(3).t().shape == (3,)
    close(m.expand(4, -1, -1), np.broadcast_to(m.numpy(), (4, 2, 3)))
    close(m.view_as(xp.zeros(3, 2)), m.numpy().reshape(3, 2))
    assert m.contiguous() is m
    close(xp.transpose(m, 0, 1), m.numpy().T)
    close(xp.permute(xp.from_numpy(a), (3, 2, 1, 0)), a.transpose(3, 2, 1, 0))


def test_arithmetic_keywords():
    a, b = arr(3), arr(3) + 3
    ta, tb = xp.from_numpy(a), xp.from_numpy(b)
    close(ta.add(tb, alpha=2), a + 2 * b)
    close(xp.sub(ta, 1.0, alpha=0.5), a - 0.5)
    close(ta.div(tb, rounding_mode="floor"), np.floor(a / b))
    close(ta.div(tb, rounding_mode="trunc"), np.trunc(a / b))
    i = xp.tensor([7, -7])
    assert (i // 2).tolist() == [3, -4] and (i // 2).dtype == "int64"
    assert i.div(2, rounding_mode="trunc").tolist() == [3, -3]
    close(ta.pow(2), a ** 2)
    close(xp.erf(ta), np.vectorize(__import__("math").erf)(a), 1e-6)
    np.testing.assert_array_equal(ta.eq(ta).numpy(), np.ones(3, bool))
    np.testing.assert_array_equal(xp.gt(ta, 0).numpy(), a > 0)


def test_in_place_ops():
    t = xp.zeros(3)
    t += 1
    t.mul_(3).sub_(xp.ones(3), alpha=0.5)
    close(t, [2.5, 2.5, 2.5])
    alias = t
    t.copy_(np.array([1.0, 2.0, 3.0]))
    close(alias, [1.0, 2.0, 3.0])
    t.masked_fill_(t > 1.5, 0.0)
    close(t, [1.0, 0.0, 0.0])
    t.fill_(4).clamp_(max=2)
    close(t, [2.0, 2.0, 2.0])
    t.zero_()
    close(t, [0.0, 0.0, 0.0])
    i = xp.tensor([1, 2])
    with pytest.raises(xp.ShapeError, match="cannot be cast"):
        i /= 2
    with pytest.raises(xp.ShapeError, match="does not fit"):
        xp.zeros(3).add_(xp.zeros(2, 3))


def test_in_place_on_a_parameter_needs_no_grad():
    w = xp.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with pytest.raises(xp.AutogradError, match="no_grad"):
        w -= 0.1 * w.grad
    with xp.no_grad():
        w -= 0.1 * w.grad  # a hand-written SGD step, as in PyTorch tutorials
    assert w.requires_grad
    close(w, [0.8, 1.6])


def test_clone_deepcopy_and_pickle():
    x = xp.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    assert y.requires_grad
    (y * 3).sum().backward()
    close(x.grad, [3.0, 3.0])
    with xp.no_grad():
        snap = x.clone()
        x.add_(1.0)
    close(snap, [1.0, 2.0])
    d = copy.deepcopy(x)
    assert d is not x and d.requires_grad
    close(d, [2.0, 3.0])
    back = pickle.loads(pickle.dumps(x))
    assert back.requires_grad and back.dtype == "float32"
    close(back, [2.0, 3.0])
    b16 = pickle.loads(pickle.dumps(xp.tensor([1.5], dtype=xp.bfloat16)))
    assert b16.dtype == "bfloat16"


# ---- nn -------------------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self, seed=0):
        super().__init__()
        self.fc1 = nn.Linear(4, 8, seed=seed + 1)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(8, 3, seed=seed + 2)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def test_state_dict_names_order_and_round_trip():
    model = Net()
    sd = model.state_dict()
    assert list(sd) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(not v.requires_grad for v in sd.values())
    seq = nn.Sequential(nn.Linear(2, 3, seed=3), nn.ReLU(), nn.Linear(3, 1, seed=4))
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    named = nn.Sequential(OrderedDict([("hidden", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert list(named.state_dict()) == ["hidden.weight", "hidden.bias"]
    assert named[0] is named.hidden and len(named) == 2

    other = Net(seed=10)
    assert not np.allclose(other.fc1.weight.numpy(), model.fc1.weight.numpy())
    result = other.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())
    assert other.fc1.weight.requires_grad
    # NumPy values load too, and a checkpoint survives pickling.
    arrays = {k: v.numpy() for k, v in pickle.loads(pickle.dumps(sd)).items()}
    Net().load_state_dict(arrays)


def test_load_state_dict_errors_like_torch():
    model, sd = Net(), Net().state_dict()
    bad = dict(sd, extra=xp.zeros(1))
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        model.load_state_dict(bad)
    assert model.load_state_dict(bad, strict=False).unexpected_keys == ["extra"]
    del bad["fc2.bias"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "fc2.bias"'):
        model.load_state_dict(bad)
    wrong = dict(sd, **{"fc1.bias": xp.zeros(5)})
    with pytest.raises(RuntimeError, match="size mismatch for fc1.bias"):
        model.load_state_dict(wrong, strict=False)


def test_train_eval_reach_every_module_and_dropout_follows():
    model = Net()
    assert model.training and model.drop.training
    x = xp.ones(64, 4)
    model.eval()
    assert not model.training and not model.drop.training
    h = F.relu(model.fc1(x))
    close(model.drop(h), h.numpy())
    model.train()
    dropped = model.drop(h).numpy()
    assert (dropped == 0).mean() > 0.3
    kept = dropped != 0
    close(dropped[kept], (h.numpy() * 2)[kept])
    close(nn.Dropout(p=0.0)(h), h.numpy())
    close(F.dropout(h, p=0.5, training=False), h.numpy())
    assert (F.dropout(h, p=1.0).numpy() == 0).all()
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_module_tree():
    model = Net()
    assert [n for n, _ in model.named_parameters()] == list(model.state_dict())
    assert [n for n, _ in model.named_children()] == ["fc1", "drop", "fc2"]
    assert [n for n, _ in model.named_modules()] == ["", "fc1", "drop", "fc2"]
    model.register_buffer("scale", xp.ones(3))
    model.register_buffer("cache", xp.zeros(2), persistent=False)
    assert "scale" in model.state_dict() and "cache" not in model.state_dict()
    assert [n for n, _ in model.named_buffers()] == ["scale", "cache"]
    model.requires_grad_(False)
    assert model.parameters() == []
    model.requires_grad_(True)
    assert len(model.parameters()) == 4
    (model(xp.ones(2, 4)).sum()).backward()
    assert model.fc1.weight.grad is not None
    model.zero_grad()
    assert model.fc1.weight.grad is None
    assert model.to("cpu") is model and model.to(xp.device("xla")) is model
    model.double()
    assert model.fc1.weight.dtype == "float64" and model.fc1.weight.requires_grad
    assert model(xp.ones(2, 4, dtype="float64")).dtype == "float64"
    assert "(fc1): Linear(in_features=4, out_features=8, bias=True)" in repr(model)
    assert "(drop): Dropout(p=0.5, inplace=False)" in repr(model)


def test_module_lists_and_dicts():
    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1)})

    names = list(Blocks().state_dict())
    assert names == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                     "heads.a.weight", "heads.a.bias"]


def test_losses_against_numpy():
    logits, labels = arr(6, 4), RNG.integers(0, 4, 6)
    t, y = xp.from_numpy(logits), xp.from_numpy(labels)
    logp = np.log(softmax(logits, 1))
    nll = -logp[np.arange(6), labels]
    close(F.cross_entropy(t, y), nll.mean())
    close(nn.CrossEntropyLoss()(t, y), nll.mean())
    close(F.cross_entropy(t, y, reduction="sum"), nll.sum(), 1e-4)
    close(F.cross_entropy(t, y, reduction="none"), nll)
    w = np.array([1.0, 2.0, 0.5, 1.5], np.float32)
    close(F.cross_entropy(t, y, weight=xp.from_numpy(w)),
          (w[labels] * nll).sum() / w[labels].sum())
    ignored = labels.copy()
    ignored[:2] = -100
    close(F.cross_entropy(t, xp.from_numpy(ignored)), nll[2:].mean())
    eps = 0.1
    smooth = -logp.mean(1)
    close(F.cross_entropy(t, y, label_smoothing=eps), ((1 - eps) * nll + eps * smooth).mean())
    probs = softmax(arr(6, 4), 1)
    close(F.cross_entropy(t, xp.from_numpy(probs)), -(probs * logp).sum(1).mean())
    close(F.nll_loss(t.log_softmax(1), y), nll.mean())
    a, b = arr(5), arr(5)
    close(F.mse_loss(xp.from_numpy(a), xp.from_numpy(b)), ((a - b) ** 2).mean())
    close(nn.L1Loss(reduction="sum")(xp.from_numpy(a), xp.from_numpy(b)), np.abs(a - b).sum(),
          1e-4)
    target = (RNG.random(5) > 0.5).astype(np.float32)
    p = 1 / (1 + np.exp(-a))
    bce = -(target * np.log(p) + (1 - target) * np.log(1 - p))
    close(F.binary_cross_entropy_with_logits(xp.from_numpy(a), xp.from_numpy(target)), bce.mean())
    close(nn.BCELoss()(xp.from_numpy(p), xp.from_numpy(target)), bce.mean(), 1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(F.mse_loss(xp.from_numpy(a), xp.from_numpy(b), size_average=False),
              ((a - b) ** 2).sum(), 1e-4)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(xp.from_numpy(a), xp.from_numpy(b), reduction="avg")


def test_activations_against_numpy():
    import math

    a = arr(10)
    t = xp.from_numpy(a)
    exact = a * 0.5 * (1 + np.vectorize(math.erf)(a / math.sqrt(2)))
    close(F.gelu(t), exact, 1e-6)
    close(nn.GELU()(t), exact, 1e-6)
    close(nn.GELU(approximate="tanh")(t), exact, 1e-3)
    close(F.leaky_relu(t, 0.2), np.where(a > 0, a, 0.2 * a))
    close(nn.SiLU()(t), a / (1 + np.exp(-a)))
    close(F.one_hot(xp.tensor([0, 2])), np.eye(3)[[0, 2]])
    assert F.one_hot(xp.tensor([1]), num_classes=4).dtype == "int64"


def test_functional_layers():
    x, w, b = arr(2, 3, 6, 6), arr(4, 3, 3, 3), arr(4)
    tx, tw, tb = xp.from_numpy(x), xp.from_numpy(w), xp.from_numpy(b)
    out = F.conv2d(tx, tw, tb, stride=(1, 1), padding=1)
    assert out.shape == (2, 4, 6, 6)
    close(out - F.conv2d(tx, tw, padding=1), np.broadcast_to(b[None, :, None, None], out.shape),
          1e-4)
    conv = nn.Conv2d(3, 4, 3, padding="same", bias=False, seed=1)
    assert conv(tx).shape == (2, 4, 6, 6) and conv.bias is None
    assert F.max_pool2d(tx, (2, 2)).shape == (2, 3, 3, 3)
    close(F.linear(xp.from_numpy(x[0, 0]), xp.from_numpy(x[0, 1]), xp.from_numpy(b[:1])),
          x[0, 0] @ x[0, 1].T + b[0], 1e-4)
    ids = xp.tensor([0, 1, 0])
    emb = nn.Embedding(3, 2, padding_idx=0, seed=1)
    assert (emb(ids).numpy()[[0, 2]] == 0).all()
    close(nn.LayerNorm(6)(tx), (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5),
          1e-4)
    assert nn.Flatten()(tx).shape == (2, 108) and nn.Identity()(tx) is tx


def test_optimizers_speak_torch():
    model = Net()
    opt = xp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.1
    opt.param_groups[0]["lr"] = 0.05
    assert opt.lr == 0.05
    with pytest.raises(ValueError, match="nesterov"):
        xp.optim.SGD(model.parameters(), lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="amsgrad"):
        xp.optim.Adam(model.parameters(), amsgrad=True)
    with pytest.raises(TypeError, match="parameter groups"):
        xp.optim.Adam([{"params": model.parameters()}])

    def closure():
        opt.zero_grad()
        loss = model(xp.ones(2, 4)).pow(2).mean()
        loss.backward()
        return loss

    assert opt.step(closure) is not None


# ---- a program written by a PyTorch user -----------------------------------------------------

# A PyTorch/XLA training script: lazy tensors need a step boundary (`xm.mark_step()`, which is
# `xp.step()`), or each step's graph holds every step before it.
PROGRAM = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla.core.xla_model as xm

torch.manual_seed(0)
device = xm.xla_device()


class Classifier(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.dropout = nn.Dropout(p=0.2)
        self.fc2 = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        return self.fc2(x)


X = torch.randn(256, 10)
true_w = torch.randn(10, 3)
y = (X @ true_w).argmax(dim=1)

model = Classifier(10, 32, 3).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()

scale = torch.randn(1, requires_grad=True)  # a leaf of our own, trained too
losses = []
model.train()
for epoch in range(60):
    optimizer.zero_grad()
    logits = model(X.to(device)) * scale.exp()
    loss = criterion(logits, y)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        scale -= 0.01 * scale.grad
    scale.grad = None
    xm.mark_step()
    losses.append(loss.item())

model.eval()
with torch.no_grad():
    logits = model(X)
    probs = torch.softmax(logits, dim=1)
    pred = probs.argmax(dim=1)
    accuracy = (pred == y).float().mean().item()
    masked = logits.masked_fill(probs < 0.1, float("-inf"))
    top = masked.argmax()

checkpoint = {k: v.cpu() for k, v in model.state_dict().items()}
restored = Classifier(10, 32, 3)
restored.load_state_dict(checkpoint)
restored.eval()
same = torch.allclose(restored(X), model(X))
host = probs.to("cpu").double().numpy()
result = (losses[0], losses[-1], accuracy, same, host.dtype, int(top))
'''


def test_a_pytorch_program_runs_unchanged():
    import sys
    import types

    torch = types.ModuleType("torch")
    torch.__dict__.update({k: getattr(xp, k) for k in dir(xp) if not k.startswith("__")})
    xla_model = types.ModuleType("torch_xla.core.xla_model")
    xla_model.mark_step = xp.step
    xla_model.xla_device = lambda: xp.device("xla")
    modules = {"torch": torch, "torch.nn": xp.nn, "torch.nn.functional": xp.nn.functional,
               "torch.optim": xp.optim, "torch_xla": types.ModuleType("torch_xla"),
               "torch_xla.core": types.ModuleType("torch_xla.core"),
               "torch_xla.core.xla_model": xla_model}
    saved = {k: sys.modules.get(k) for k in modules}
    sys.modules.update(modules)
    try:
        scope = {}
        exec(compile(PROGRAM, "pytorch_program.py", "exec"), scope)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    first, last, accuracy, same, dtype, top = scope["result"]
    assert last < first * 0.5, (first, last)
    assert accuracy > 0.8
    assert same
    assert dtype == np.float64
    assert 0 <= top < 256 * 3
