"""The line the runner says at exit: what the engine did for the program, and where its profile
is."""

from __future__ import annotations

import sys
from typing import Optional

from xlaprof import _native

from . import _target

# Compiles after this step are not warm-up.
WARM_UP_STEPS = 2


def say(profile_path: Optional[str]) -> None:
    target = _target.current()
    if target.reference:
        print(f"xlaprof: the reference run, on CPU eager: {target.steps} steps", file=sys.stderr)
        return
    profile = _native.whole_program_profile()
    if profile is None:
        return
    later = len(profile.compiles_after(WARM_UP_STEPS))
    findings = profile.diagnostics()
    line = (f"xlaprof: {profile.steps} steps, {profile.compiles} graphs compiled ({later} after step "
            f"{WARM_UP_STEPS}), {len(findings)} findings")
    if findings:
        line += f" (the first: {findings[0]['title']} at {findings[0]['location']})"
    if profile_path:
        line += f"; the profile: {profile_path} (xlaprof report {profile_path})"
    else:
        line += "; XLAPROF_PROFILE=FILE (or --profile FILE) keeps the profile"
    print(line, file=sys.stderr)
