"""The notebook widget: what it shows, and that a profile with hostile strings renders inert."""

import os
import re

import numpy as np

import xlaprof as xp

HERE = os.path.basename(__file__)
HOSTILE_FILE = "<img src=x onerror=alert(1)>.py"
HOSTILE_FUNCTION = "</details><script>alert(2)</script>"
HOSTILE_SCOPE = "<script>alert(3)</script>\x1b[31m\x00"

SOURCE = """
def run(n):
    x = xp.ones(n, n)
    return (x @ x).relu().sum().item()
"""


def hostile_profile():
    namespace = {"xp": xp}
    exec(compile(SOURCE, HOSTILE_FILE, "exec"), namespace)
    run = namespace["run"]
    run.__code__ = run.__code__.replace(co_name=HOSTILE_FUNCTION, co_qualname=HOSTILE_FUNCTION)
    with xp.profile(title=HOSTILE_SCOPE) as p:
        with xp.profile_scope(HOSTILE_SCOPE):
            for n in (3, 6):
                run(n)
                xp.step()
    return p


def test_hostile_strings_render_as_text():
    p = hostile_profile()
    locations = {d["location"] for d in p.diagnostics()}
    assert any(HOSTILE_FUNCTION in loc for loc in locations), locations
    html = p._repr_html_()
    tags = set(re.findall(r"<\s*([a-zA-Z][\w-]*)", html))
    assert "script" not in tags and "img" not in tags, tags
    assert "&lt;img src=x onerror=alert(1)&gt;.py" in html
    assert "&lt;/details&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(3)&lt;/script&gt;\\x1b[31m\\x00" in html
    assert not any(ord(c) < 32 and c not in "\n\t" for c in html)
    # Every <details> the widget opens, it closes: a name cannot close one early.
    assert html.count("<details") == html.count("</details>")


def test_widget_sections():
    def step(n):
        x = xp.tensor(np.ones((4, n), np.float32))
        y = (x * 2.0).sum()
        xp.step()
        return y

    with xp.profile(title="sections") as p:
        for n in (2, 2, 3):
            step(n)
    html = p._repr_html_()
    for section in ("Summary", "Diagnostics", "Timeline", "Flamegraph", "Metrics", "Graphs"):
        assert f"<summary>{section}" in html, section
    assert '<svg class="xp-flame"' in html and 'class="xp-timeline"' in html
    assert "ExecuteTime" in html
    # The input is named by the variable its line assigns, never by its number in the graph.
    assert "a recompile" in html and f"`x` made at {HERE}:" in html and "changed from f32[4,2] to f32[4,3]" in html
    assert "(input 0)" not in html
    assert "<script" not in html
    # The text fallback is the short report.
    assert repr(p).startswith("xlaprof report")
