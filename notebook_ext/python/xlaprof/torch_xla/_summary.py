"""The line the runner says at exit: what the engine did for the program, and where its profile
is."""

from __future__ import annotations

import sys
from typing import Optional

from xlaprof import _native

from . import _target


def say(profile_path: Optional[str]) -> None:
    target = _target.current()
    if target.reference:
        print(f"xlaprof: the reference run, on CPU eager: {target.steps} steps", file=sys.stderr)
        return
    profile = _native.whole_program_profile()
    if profile is None:
        return
    summary, findings = profile.summary(), profile.diagnostics()
    line = (f"xlaprof: {summary['steps']} steps, {summary['compiles']} graphs compiled "
            f"({summary['compiles_after_warmup']} after warm-up), {len(findings)} findings")
    if findings:
        line += f" (the first: {findings[0]['title']} at {findings[0]['location']})"
    if profile_path:
        line += f"; the profile: {profile_path} (xlaprof report {profile_path})"
    else:
        line += "; XLAPROF_PROFILE=FILE (or --profile FILE) keeps the profile"
    print(line, file=sys.stderr)
