"""xlaprof: a lazy-tensor engine on the XLA compiler, with a profiler that says why it is slow.

    import xlaprof as xp
    x = xp.randn(64, 32)
    with xp.profile() as p:
        y = (x @ x.T).relu().sum()
        print(y.item())
    print(p.report())

In Jupyter: ``%load_ext xlaprof``, then ``%%xla_profile`` on a cell.
"""

from __future__ import annotations

import atexit as _atexit
import builtins as _builtins
import os as _os
import sys as _sys

from ._plugin import ensure_plugin as _ensure_plugin

_ensure_plugin()

from . import _native  # noqa: E402
from ._native import (  # noqa: E402
    AutogradError,
    InternalError,
    Mesh,
    PluginError,
    ProfileError,
    ShapeError,
    ShardingError,
    SyncError,
    AnomalyError,
    BreakError,
    Tensor,
    XlaError,
    XlaprofError,
    devices,
    get_1d_mesh,
    get_global_mesh,
    mark_sharding,
    set_global_mesh,
)

# Ops are located at the first frame outside this package.
_native.set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)


def _library_dirs() -> list:
    """Where installed packages and the standard library live: a sync or fallback caused in their
    code is reported at the user's line that called into them."""
    import site as _site
    import sysconfig as _sysconfig

    paths = _sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(getattr(_site, "getsitepackages", lambda: [])())
    user = getattr(_site, "getusersitepackages", lambda: None)()
    dirs.add(user if isinstance(user, str) else None)
    return sorted(_os.path.abspath(d) + _os.sep for d in dirs if d)


for _dir in _library_dirs():
    _native.add_library_dir(_dir)


def _record_whole_program() -> None:
    """`XLAPROF_PROFILE=FILE` (what `xlaprof run -- python train.py` sets) records the whole
    program from here on, every record on disk as it happens. Where the host runs ahead of the
    device (GPUs), the programs still running at exit are waited for, so the profile has them.
    Called at import, and by a runner that sets the variable later (`xlaprof.torch_xla`)."""
    if _job_launcher() or not _native.record_from_env() or _recording_whole_program[0]:
        return
    _recording_whole_program[0] = True

    def _wait_at_exit() -> None:
        try:
            _native.wait()
        except Exception:  # a failed program was the program's to see; the profile has the rest
            pass
        _native.flush_whole_program()  # what happened after the last sync, step or collective

    _atexit.register(_wait_at_exit)
    # torch.compile is watched too; a program that imports torch later is watched from torch's
    # import on (`_autoload`).
    if "torch" in _sys.modules:
        from . import _distributed, _torch_compile

        _torch_compile.install()
        _distributed.install()


def _job_launcher() -> bool:
    """Whether this process is torchrun's (or `torch.distributed.launch`'s) launcher, which runs
    no part of the program: its ranks record the job, each beside the others."""
    launcher = _sys.argv[0].replace("\\", "/") if _sys.argv else ""
    return launcher.endswith(("/torchrun", "torch/distributed/run.py", "torch/distributed/launch.py"))


_recording_whole_program = [False]
_record_whole_program()

# `XLAPROF_DEBUG_NANS=1`: where the host ran ahead of the device, the last sync's verdict is read
# at the next sync or wait; one the program never made is read at exit, and a NaN reported then.
if _os.environ.get("XLAPROF_DEBUG_NANS", "") not in ("", "0"):
    _atexit.register(_native.wait)

from ._api import (  # noqa: E402
    arange,
    as_tensor,
    avg_pool2d,
    cat,
    conv2d,
    counters,
    cross_entropy,
    dropout,
    eye,
    from_numpy,
    full,
    is_grad_enabled,
    layer_norm,
    manual_seed,
    max_pool2d,
    no_grad,
    ones,
    profile_scope,
    rand,
    randn,
    stack,
    step,
    sync,
    tensor,
    wait,
    where,
    zeros,
)
from ._device import device  # noqa: E402
from ._debug import detect_anomaly, explain, forbid_sync  # noqa: E402
from ._profile import Job, Profile, compare, load, load_job, metrics_report, profile  # noqa: E402
from . import nn, optim, return_types  # noqa: E402

# Dtypes are their NumPy names; PyTorch's other names for them are here too (`xp.long`).
bool_ = "bool"
int8 = "int8"
int32 = "int32"
int64 = "int64"
uint8 = "uint8"
float16 = "float16"
bfloat16 = "bfloat16"
float32 = "float32"
float64 = "float64"
half = float16
double = float64
long = int64
float = float32  # noqa: A001  (PyTorch's names, as attributes of the package only)
int = int32  # noqa: A001
bool = bool_  # noqa: A001

# PyTorch's module-level functions (`xp.softmax(x, 1)`, `xp.argmax(x)`, ...). Some are named as
# builtins are (`sum`, `max`, `abs`): as in PyTorch, only as attributes of the package.
from ._functions import *  # noqa: E402,F401,F403
from ._functions import __all__ as _function_names  # noqa: E402

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # type: ignore[no-untyped-def]
    """``%load_ext xlaprof``: registers ``%xla_profile`` and ``%%xla_profile``."""
    from ._magic import load

    load(ipython)


def _name_notebook_cells() -> None:
    # Inside IPython, cells are named as IPython names them (`In[5]`), not by their temp files.
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        from ._magic import name_cells

        name_cells(ip)


_name_notebook_cells()

from ._breaks import break_on  # noqa: E402
from . import _breaks  # noqa: E402

_breaks.from_env()

__all__ = [
    "AutogradError", "InternalError", "Mesh", "PluginError", "ProfileError", "ShapeError",
    "ShardingError", "SyncError", "AnomalyError", "BreakError", "break_on", "Tensor", "detect_anomaly", "explain", "forbid_sync", "devices", "get_1d_mesh", "get_global_mesh", "mark_sharding",
    "set_global_mesh",
    "XlaError", "XlaprofError", "Job", "Profile", "compare", "arange", "as_tensor", "avg_pool2d", "bfloat16",
    "bool_", "cat", "conv2d", "counters", "cross_entropy", "device", "double", "dropout", "eye",
    "float16", "float32", "float64", "from_numpy", "full", "half", "int8", "int32", "int64",
    "is_grad_enabled", "layer_norm", "load", "load_job", "long", "manual_seed", "max_pool2d",
    "metrics_report", "nn", "no_grad", "ones", "optim", "profile", "profile_scope", "rand",
    "randn", "return_types", "stack", "step", "sync", "tensor", "uint8", "wait", "where", "zeros",
    # `from xlaprof import *` leaves the builtins alone: `xp.sum`, `xp.max`, `xp.float`, ... are
    # attributes only.
] + [_n for _n in _function_names if not hasattr(_builtins, _n)]
