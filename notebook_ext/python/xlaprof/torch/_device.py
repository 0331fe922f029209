"""The ``xlaprof`` device for torch: PrivateUse1, registered from Python, once per process.

torch names its own lazy device ``xla`` (``Tensor.is_xla`` is built in), so ours is ``xlaprof``.
Tensors are created on it by three backend kernels: ``empty`` and ``empty_strided`` (every
factory starts there: ``torch.randn(..., device=dev)`` is ``empty`` then ``normal_``) and
``_copy_from`` (a copy that torch routes to the backend); everything else reaches the bridge
through the tensor subclass's ``__torch_dispatch__``.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import torch

DEVICE_TYPE = "xlaprof"

_registered = False

FACTORIES = (
    "arange.start_step", "arange.start", "arange", "full", "zeros", "ones", "scalar_tensor",
    "eye", "eye.m", "linspace", "logspace", "randperm", "tril_indices", "triu_indices",
    "randint", "randint.low", "rand", "randn", "_efficientzerotensor",
)


def register() -> None:
    """Registers the device (idempotent)."""
    global _registered
    if _registered:
        return
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    if torch._C._get_privateuse1_backend_name() != DEVICE_TYPE:
        _setup_privateuseone_for_python_backend(DEVICE_TYPE, backend_module=_Backend(),
                                                device_guard=_device_guard())
    from . import _tensor

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", _tensor.empty_memory_format, "PrivateUse1")
    lib.impl("empty_strided", _tensor.empty_strided, "PrivateUse1")
    lib.impl("_copy_from", _tensor.copy_from, "PrivateUse1")
    # Factories that torch would build as `empty` plus an `out=` op (`arange.start_out`), whose
    # result a wrapper tensor cannot be resized to: made whole, by the bridge's dispatcher.
    from ._dispatch import dispatch

    for name in FACTORIES:
        op = torch._ops.ops.aten
        for part in name.split("."):
            op = getattr(op, part)
        op = getattr(op, "default", op)
        lib.impl(name, (lambda op: lambda *a, **k: dispatch(op, a, k))(op), "PrivateUse1")
    # torch has no meta kernel for this backward, so `torch.compile` of a model holding
    # `nn.FractionalMaxPool3d` failed tracing the backward, whatever the backend; its result is
    # shaped as the input.
    if not torch._C._dispatch_has_kernel_for_dispatch_key("aten::fractional_max_pool3d_backward", "Meta"):
        lib.impl("fractional_max_pool3d_backward", lambda grad, x, *rest: torch.empty_like(x), "Meta")
    from . import _autocast, _decomposed, _module, _recurrent

    _module.register()
    _recurrent.register(lib)
    _decomposed.register(lib)
    every_op = _autocast.register(lib)
    # Kept alive for the process: dropping a library unregisters its kernels.
    global _libraries
    _libraries = (lib, every_op)
    # torch's own frames are not the user's: ops are located at the line that called into torch.
    from .. import _native

    _native.add_internal_dir(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    _run_backward_on_the_calling_thread()
    _resize_storage_in_place()
    _answer_memory_queries()
    _registered = True


# How torch's autograd engine fails once a PrivateUse1 device is registered, with an internal
# assert that names neither the cause nor the way out.
_ENGINE_FAILURES = (
    ("opt_ready_stream && opt_parent_stream",
     "torch cannot run a CUDA backward in a process where a PrivateUse1 device (here xlaprof) is "
     "registered: its autograd engine then takes the streams of that device alone "
     "(pytorch/pytorch#161129). Run CUDA training in a process that does not import "
     "xlaprof.torch; XLAPROF_DEVICE=cuda runs the engine itself on the GPU."),
)


def _misplaced_gradient(args: Any) -> Optional[str]:
    """The engine's stream assert also fires for a gradient given on another device than its
    output (``torch.autograd.grad(cpu_out, x, torch.ones(3, device=dev))``): said so, where
    that is the case (``args``: ``_engine_run_backward``'s, outputs then their gradients)."""
    outputs, grads = (list(args[0]), list(args[1])) if len(args) > 1 else ([], [])
    for i, (out, grad) in enumerate(zip(outputs, grads)):
        if isinstance(out, torch.Tensor) and isinstance(grad, torch.Tensor) and grad.device != out.device:
            return (f"the gradient given for output {i} is on {grad.device}, but the output is on "
                    f"{out.device}: give each output's gradient on the output's device")
    return None


def _run_backward_on_the_calling_thread() -> None:
    """Wraps the one function every backward() and autograd.grad() runs the engine through.

    torch's autograd engine runs a device's part of a backward on a thread of its own (one per
    device, so that a GPU's backward overlaps the CPU's). This device's backward is recorded
    on the host, by the same Python code as the forward, so that thread buys nothing, and
    handing the work to it and back cost 110-160 us a backward (a compiled `(x * 2).sum()`:
    236 us against 75 us on the calling thread; lazily 151 against 37). With torch's
    multithreading switched off for the call, every part runs on the thread that called
    backward(), as a CPU's does (and a backward that ran before the device was registered, when
    the engine made its threads and queues once and for all, no longer leaves this device
    without one). Also, the engine failure above surfaces as an error that says what happened
    and what to do, and an op that failed in a built-in backward node raises its own error,
    which the device guard kept (`_device_guard`)."""
    import torch.autograd
    import torch.autograd.graph

    from .. import _native

    run = torch.autograd.graph._engine_run_backward
    if getattr(run, "_xlaprof", False):
        return
    multithreading = torch.autograd.set_multithreading_enabled

    def engine_run_backward(*args: Any, **kwargs: Any) -> Any:
        _native.take_guard_error()  # none kept from before this backward
        try:
            with multithreading(False):
                return run(*args, **kwargs)
        except SystemError:
            # An op of a built-in backward node failed: the device guard kept its error (see
            # `_device_guard`) and torch, finding none pending, raised this instead.
            kept = _native.take_guard_error()
            if kept is None:
                raise
            raise kept.with_traceback(kept.__traceback__) from None
        except RuntimeError as e:
            text = str(e)
            for sign, explanation in _ENGINE_FAILURES:
                if sign in text:
                    raise RuntimeError(_misplaced_gradient(args) or explanation) from e
            raise

    engine_run_backward._xlaprof = True  # type: ignore[attr-defined]
    torch.autograd.graph._engine_run_backward = engine_run_backward
    torch.autograd._engine_run_backward = engine_run_backward


def _resize_storage_in_place() -> None:
    """Lets an xlaprof storage be "resized" to the size it has, which is nothing to do.

    Dynamo's fake copy of a tensor with no elements (its storage has zero bytes) resizes the
    fake's storage to zero bytes (`meta_utils.meta_tensor`). torch routes a storage resize of a
    PrivateUse1 device to a C++ hook (`resizePrivateUse1Bytes`) that a device registered from
    Python cannot implement, so `torch.compile` of any function given an empty tensor failed
    with torch's "You should register PrivateUse1HooksInterface". A real resize of our storage
    (a wrapper's, with no bytes of its own) is an error that says so."""
    resize = torch.UntypedStorage.resize_
    if getattr(resize, "_xlaprof", False):
        return

    def resize_(self: Any, size: int) -> Any:
        if self.device.type != DEVICE_TYPE:
            return resize(self, size)
        if size == self.nbytes():
            return self
        raise NotImplementedError(
            f"an xlaprof tensor's storage cannot be resized (to {size} bytes from {self.nbytes()}): "
            "its values live on the device, not in the storage; resize the tensor instead "
            "(`t.resize_(shape)`)")

    resize_._xlaprof = True  # type: ignore[attr-defined]
    torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]


def _answer_memory_queries() -> None:
    """Lets ``torch.accelerator``'s memory functions answer for this device, as for one whose
    caching allocator holds nothing.

    Once this device is registered it is torch's current accelerator (torch looks for a
    PrivateUse1 device before CUDA), and ``torch.accelerator.empty_cache()``,
    ``memory_stats()``, ``memory_allocated()`` and the rest failed with an internal assert
    ("Allocator for xlaprof is not a DeviceAllocator"): torch asks the device's allocator, and
    a device registered from Python has none of that kind. accelerate calls ``empty_cache()``
    as the Hugging Face Trainer starts training, so the Trainer failed on the device. torch's
    allocator does hold nothing here (a tensor on this device is a wrapper with no bytes; its
    values are the engine's device buffers, which go when the tensor goes), so torch's answer
    for an allocator not yet in use is the true one: ``empty_cache()`` does nothing and the
    statistics are empty. The device's own memory (PJRT's figures, where the plugin keeps them)
    is in the profile, step by step. ``get_memory_info()`` says the same in an error.

    ``torch.accelerator.synchronize()`` (which failed: "Backend doesn't support synchronizing
    all streams on device") keeps CUDA's promise that every op issued before it has run: the
    ops pending are run (a sync) and the device is waited for."""
    c = torch._C
    initialized = getattr(c, "_accelerator_isAllocatorInitialized", None)
    if initialized is None or getattr(initialized, "_xlaprof", False):
        return  # a torch without these functions has nothing to fail

    def ours() -> bool:
        accelerator = c._accelerator_getAccelerator()
        return accelerator is not None and accelerator.type == DEVICE_TYPE

    def is_allocator_initialized() -> bool:
        return False if ours() else initialized()

    memory_info = getattr(c, "_accelerator_getMemoryInfo", None)

    def get_memory_info(device_index: int) -> Any:
        if ours():
            raise RuntimeError(
                "torch.accelerator.get_memory_info() has no figures for the xlaprof device: torch's "
                "allocator holds none of its memory (the engine's device buffers are PJRT's); "
                "a profile (xlaprof.profile()) records the device's memory at each step where the "
                "plugin reports it")
        return memory_info(device_index)

    synchronize_device = c._accelerator_synchronizeDevice

    def synchronize(device_index: int) -> None:
        return _synchronize() if ours() else synchronize_device(device_index)

    wraps = [("_accelerator_isAllocatorInitialized", is_allocator_initialized),
             ("_accelerator_synchronizeDevice", synchronize)]
    if memory_info is not None:
        wraps.append(("_accelerator_getMemoryInfo", get_memory_info))
    for name, wrapped in wraps:
        wrapped._xlaprof = True  # type: ignore[attr-defined]
        setattr(c, name, wrapped)


def _synchronize(device: object = None) -> None:
    """Runs every op pending and waits until the device has run it (``torch.cuda.synchronize``)."""
    from . import sync, wait

    sync()
    wait()


def _device_guard() -> Any:
    """The device guard torch asks its device type of, two or three times per aten op under
    autograd (the backward's ops most). torch's default answers
    from a Python method; this one from a native callable that returns the constant, with no
    Python frame (a microsecond per recorded op of a training step). torch also asks it while
    unwinding a backward node whose op failed, with the op's error still pending, where a failed
    answer would end the process: the answer keeps that error for the backward's caller
    (`_run_backward_on_the_calling_thread`) to raise."""
    from .. import _native

    class DeviceGuard(torch._C._acc.DeviceGuard):  # type: ignore[name-defined,misc]
        type_ = _native.DeviceTypeAnswer(torch._C._autograd.DeviceType.PrivateUse1)

    return DeviceGuard()


class _Backend:
    """``torch.xlaprof``: what torch asks of a device's module."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed(seed: int) -> None:
        # `torch.manual_seed(s)` seeds the engine's random stream too.
        from .. import _native

        _native.manual_seed(int(seed))

    manual_seed_all = manual_seed

    synchronize = staticmethod(_synchronize)

    @staticmethod
    def get_rng_state(device: object = None) -> torch.Tensor:
        # The engine's random stream lives in the engine and cannot be saved and restored:
        # an empty state, which set_rng_state accepts (torch's freeze_rng_state asks for both).
        return torch.empty(0, dtype=torch.uint8)

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: object = None) -> None:
        return None

    @staticmethod
    def get_amp_supported_dtype() -> list:
        return [torch.float16, torch.bfloat16]


def device(index: Optional[int] = 0) -> torch.device:
    """The engine's device as torch names it: ``xlaprof:0``. ``model.to(xt.device())``."""
    register()
    if index not in (None, 0):
        raise ValueError(f"xlaprof runs on one device (xlaprof:0); device index {index} does not exist")
    return torch.device(DEVICE_TYPE, 0)


# torch dtypes and the engine's names for them.
TO_ENGINE = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.bool: "bool",
}
TO_TORCH = {v: k for k, v in TO_ENGINE.items()}


def engine_dtype(dtype: torch.dtype) -> str:
    try:
        return TO_ENGINE[dtype]
    except KeyError:
        raise TypeError(
            f"dtype {dtype} is not supported on the xlaprof device (supported: "
            + ", ".join(str(d).replace("torch.", "") for d in TO_ENGINE)
            + ")"
        ) from None
