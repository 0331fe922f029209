"""``python -m xlaprof.torch_xla [--reference] [--profile FILE] SCRIPT [ARGS...]`` (or ``-m
MODULE``): runs a PyTorch/XLA program unchanged on xlaprof, as ``python SCRIPT ARGS`` would run it
(``__main__``, ``sys.argv``, the script's folder first on ``sys.path``, its exit status), with
``import torch_xla`` resolved to xlaprof's layer.

``--reference`` runs it on CPU eager instead (the device is the CPU, steps only counted): the
losses to compare the device's with. ``--seed N`` seeds torch's generator before the program
starts, so that a program that never seeds it draws the same initial weights in both runs.
``--profile FILE`` records the whole program into FILE
(``XLAPROF_PROFILE``; ``xlaprof run --torch-xla -- python SCRIPT`` follows it live). At exit one
line on stderr sums up the run.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import List, Optional

import torch

from . import _metrics, _summary, install

USAGE = ("usage: python -m xlaprof.torch_xla [--reference] [--seed N] [--profile FILE] (SCRIPT | -m MODULE) [ARGS...]\n"
         "runs a PyTorch/XLA program unchanged on xlaprof (`import torch_xla` is xlaprof's)")


def main(argv: Optional[List[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    reference, profile, module, seed = False, None, None, None
    while args and args[0].startswith("-"):
        option = args.pop(0)
        if option == "--reference":
            reference = True
        elif option == "--seed" and args and args[0].isdigit():
            seed = int(args.pop(0))
        elif option == "--profile" and args:
            profile = args.pop(0)
        elif option.startswith("--profile="):
            profile = option.split("=", 1)[1]
        elif option == "-m" and args:
            module = args.pop(0)
            break
        elif option in ("-h", "--help"):
            print(USAGE)
            return
        else:
            sys.exit(f"{USAGE}\nunknown option {option!r}")
    if module is None and not args:
        sys.exit(f"{USAGE}\nno program given")
    profile = profile or os.environ.get("XLAPROF_PROFILE")

    install(reference=reference)
    if seed is not None:
        torch.manual_seed(seed)
    if not reference:
        profile = _metrics.record_whole_program(profile)
    try:
        if module is not None:
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            script = args[0]
            if not os.path.isfile(script):
                sys.exit(f"python -m xlaprof.torch_xla: can't open file {script!r}: no such file")
            sys.argv = list(args)
            # `python -m` put the current folder first; `python SCRIPT` puts the script's.
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
    finally:
        _summary.say(profile)


if __name__ == "__main__":
    main()
