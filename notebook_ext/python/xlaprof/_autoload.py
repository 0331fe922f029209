"""Called by torch when it is imported (its `torch.backends` entry point): where a profile
records the whole program (`XLAPROF_PROFILE`, what `xlaprof run` sets), torch.compile is
watched from the start, in programs that never import xlaprof, and so are torch.distributed's
collectives (a job's ranks, lined up by them). Costs an environment lookup
otherwise; `TORCH_DEVICE_BACKEND_AUTOLOAD=0` turns torch's entry points off."""

import os
import sys


def torch_imported() -> None:
    if not os.environ.get("XLAPROF_PROFILE") and "xlaprof" not in sys.modules:
        return
    import xlaprof

    if os.environ.get("XLAPROF_PROFILE") or xlaprof._profile.recording():
        from . import _distributed, _torch_compile

        _torch_compile.install()
        _distributed.install()
