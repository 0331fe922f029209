"""The scenario corpus: small programs modeled on real PyTorch/XLA reports, each planting one
cause at a line marked `# planted` (or none: `# expect: nothing`). Each runs as a user would run
it, recorded by `XLAPROF_PROFILE`; its findings are then held to what the file expects:

    # expect: Kind @planted | fact | fact

A planted cause is *named* when a finding of that kind names the planted line (its location or
its explanation) and says every fact; otherwise it is *missed*. A finding of a structural kind
that no expectation accounts for is a *false alarm*. Timing findings (slow step, slow compile,
idle device) depend on the machine and are not judged here.

The corpus is the specification: when a finding is wrong here, the analysis is fixed, never the
scenario.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import List

import xlaprof as xp

HERE = pathlib.Path(__file__).resolve().parent / "scenarios"
JUDGED = {"Recompile", "RecompileStorm", "Warmup", "LazyState", "HiddenSync", "MidStepSync", "HostRead",
          "HostFallback", "DataWait", "GraphBreak", "RecompileLimit", "DataDependentShape"}


@dataclass
class Expect:
    kind: str
    line: int
    facts: List[str]


@dataclass
class Scenario:
    path: pathlib.Path
    expects: List[Expect] = field(default_factory=list)
    clean: bool = False

    @property
    def name(self) -> str:
        return self.path.stem


def parse(path: pathlib.Path) -> Scenario:
    text = path.read_text()
    lines = text.splitlines()
    planted = [i + 1 for i, l in enumerate(lines) if l.rstrip().endswith("# planted")]
    s = Scenario(path)
    for l in lines:
        m = re.match(r"# expect: (.*)$", l)
        if not m:
            continue
        body = m.group(1).strip()
        if body == "nothing":
            s.clean = True
            continue
        head, *facts = [part.strip() for part in body.split("|")]
        kind, _, where = head.partition("@")
        assert where.strip() == "planted" and len(planted) == 1, f"{path.name}: one `# planted` line"
        s.expects.append(Expect(kind.strip(), planted[0], facts))
    assert s.clean != bool(s.expects), f"{path.name}: expects a finding or `nothing`, not both"
    return s


def scenarios() -> List[Scenario]:
    return [parse(p) for p in sorted(HERE.glob("*.py"))]


def run(s: Scenario, out: pathlib.Path) -> list:
    profile = out / f"{s.name}.xlaprof"
    env = dict(os.environ, XLAPROF_PROFILE=str(profile))
    done = subprocess.run(
        [sys.executable, str(s.path)], cwd=HERE, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"{s.name} failed:\n{done.stdout}\n{done.stderr}")
    return xp.load(str(profile)).diagnostics()


def run_or_error(s: Scenario, out: pathlib.Path):
    try:
        return run(s, out), None
    except Exception as e:  # a scenario that cannot run is a failure of the corpus, reported
        return [], str(e)


def text_of(d: dict) -> str:
    parts = [d["location"], d["message"], d.get("advice") or ""]
    if d.get("fix"):  # the advice as a rewrite of the user's line
        parts.append(f"change {d['fix']['at']}: {d['fix']['before'].strip()} -> {d['fix']['after'].strip()}")
    parts += d.get("change_sentences", [])
    parts += [i["message"] for i in d.get("instances", [])]
    return "\n".join(parts)


def judge(s: Scenario, findings: list):
    """(named, missed, false alarms) of one scenario."""
    def names(line: int, d: dict) -> bool:
        return re.search(rf"{re.escape(s.path.name)}:{line}\b", text_of(d)) is not None

    named, missed, used = [], [], set()
    for e in s.expects:
        hit = next(
            (
                i
                for i, d in enumerate(findings)
                if d["kind"] == e.kind
                and names(e.line, d)
                and all(f in text_of(d) for f in e.facts)
            ),
            None,
        )
        if hit is None:
            missed.append(e)
        else:
            named.append(e)
            used.add(hit)
    # A finding of a judged kind that no expectation accounts for.
    expected_kinds = {e.kind for e in s.expects}
    false = [
        d
        for i, d in enumerate(findings)
        if i not in used and d["kind"] in JUDGED
        # The storm and the recompiles it sums are one cause at one site.
        and not (d["kind"] == "Recompile" and "RecompileStorm" in expected_kinds)
    ]
    return named, missed, false


def test_corpus(tmp_path, capsys):
    all_scenarios = scenarios()
    assert len(all_scenarios) >= 50 and sum(s.clean for s in all_scenarios) >= 10
    # torch programs on the bridge: `t*` (a planted cause) and the clean ones that import torch.
    torch_programs = [s for s in all_scenarios if "import torch" in s.path.read_text()]
    assert len(torch_programs) >= 15, [s.name for s in torch_programs]
    # torch.compile programs (inductor, torch's default backend), planted and clean.
    compiled = [s for s in all_scenarios if "torch.compile" in s.path.read_text()]
    assert len(compiled) >= 10 and sum(s.clean for s in compiled) >= 2, [s.name for s in compiled]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda s: (s, *run_or_error(s, tmp_path)), all_scenarios))
    rows, failures = [], []
    totals = [0, 0, 0]
    for s, findings, error in results:
        if error is not None:
            failures.append(error)
        named, missed, false = judge(s, findings)
        totals[0] += len(named)
        totals[1] += len(missed)
        totals[2] += len(false)
        expected = ", ".join(e.kind for e in s.expects) or "nothing"
        rows.append(f"{s.name:<44} {expected:<16} {len(named):>5} {len(missed):>6} {len(false):>6}")
        for e in missed:
            got = "\n    ".join(f"{d['kind']}: {d['message']}" for d in findings) or "no findings"
            failures.append(f"{s.name}: missed {e.kind} at line {e.line} {e.facts}; found:\n    {got}")
        for d in false:
            failures.append(f"{s.name}: false alarm {d['kind']}: {d['message']}")
    table = "\n".join(
        [f"{'scenario':<44} {'expects':<16} {'named':>5} {'missed':>6} {'false':>6}", *rows,
         f"{'total':<44} {'':<16} {totals[0]:>5} {totals[1]:>6} {totals[2]:>6}"]
    )
    with capsys.disabled():
        print("\n" + table)
    assert not failures, "\n".join(failures)
