"""The interactive view in a real JupyterLab, driven by Playwright in the system Chromium: a torch
training cell under `%%xla_profile` shows the view while it runs (steps appear before the cell
ends), then the finished profile: its timeline zooms under the wheel and pans under a drag, its
recompile finding opens its two graphs with the changed input marked, a sync opens its graph,
and the line profiler shows what each line of the cell made the engine do; then the profile
side by side with another run's."""

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from playwright.sync_api import expect, sync_playwright

OUT = pathlib.Path(os.environ.get("XLAPROF_TEST_ARTIFACTS", "/tmp")) / "xlaprof-jupyterlab.png"

TRAIN = """%%xla_profile
import time
import torch
import xlaprof.torch as xt
dev = xt.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(100, 16)
for step in range(8):
    x = data[step * 16:(step + 1) * 16].to(dev)  # the last batch is ragged: 4 rows
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xt.step()
    time.sleep(0.5)  # a slow input pipeline: the view follows the steps
"""


# The training cell's profile (its result, `_2`) against a run without the ragged batch.
COMPARE = """import xlaprof as xp
with xp.profile(title="no ragged batch") as even:
    for step in range(6):
        x = data[step * 16:(step + 1) * 16].to(dev)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        xt.step()
xp.compare(_2, even)
"""

# A loop that reads its loss for the log inside every step: the finding shows the rewrite.
SUMMED = """%%xla_profile
total = 0.0
for step in range(4):
    loss = model(data[:16].to(dev)).square().mean()
    total += loss.item()  # summed for the log
    xt.step()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Chromium is not installed (scripts/setup_python.sh installs the Debian package)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "%load_ext xlaprof"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": TRAIN},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": COMPARE},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": SUMMED},
    ]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (root / "view.ipynb").write_text(json.dumps(nb))
    port, token = free_port(), "xlaprof-test"
    jupyter = pathlib.Path(sys.executable).parent / "jupyter"
    server = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
         "--LabApp.news_url=", "--allow-root"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("JupyterLab did not start: " + server.stdout.read().decode(errors="replace")[-3000:])
            time.sleep(0.5)
    yield f"{url}/lab/tree/view.ipynb?token={token}"
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


def test_the_view_follows_a_training_cell_then_zooms_and_opens_a_recompile(lab):
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        try:
            drive(page, lab)
        finally:  # what the browser showed, pass or fail
            page.screenshot(path=str(OUT), full_page=True)
            browser.close()


def drive(page, lab):
    """Runs the cells, then uses the view as a person would."""
    page.goto(lab)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # The kernel is up when the status bar says so; then both cells run.
    expect(page.locator(".jp-StatusBar-TextItem", has_text="Idle").first).to_be_visible(timeout=90_000)
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Shift+Enter")  # %load_ext
    page.keyboard.press("Shift+Enter")  # the training cell
    page.keyboard.press("Shift+Enter")  # the comparison, once the training cell is done
    page.keyboard.press("Shift+Enter")  # the loop that reads its loss for the log

    # Live: the view shows steps while the cell still runs.
    live = page.locator(".xp-w-live", has_text="recording")
    expect(live).to_have_count(1, timeout=90_000)
    expect(page.locator(".xp-w-summary").first).to_contain_text(re.compile(r"[1-9]\d* steps"), timeout=30_000)
    assert page.locator(".xp-w-live", has_text="recording").count() == 1, "the cell ended before a live update"

    # Finished: the live view gives way to the counts, the result is the interactive view.
    expect(page.locator(".jp-Cell").nth(1).get_by_text(re.compile(r"xlaprof: done in"))).to_have_count(1, timeout=120_000)
    view = page.locator(".jp-Cell").nth(1).locator(".xp-w").last
    # The static page beside it (for exports) is hidden where the view runs.
    twin = page.locator(".jp-Cell").nth(1).locator(".xlaprof-static-twin")
    expect(twin).to_have_count(1)
    expect(twin).to_be_hidden()
    expect(view.locator(".xp-findings")).to_contain_text("recompile", timeout=30_000)
    label = view.locator(".xp-window")
    whole = label.inner_text()
    assert whole.startswith("showing 0 ns"), whole

    # Wheel zoom about the cursor: the window shrinks, and Rust's bars for it arrive.
    canvas = view.locator("canvas.xp-canvas")
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    for _ in range(4):
        page.mouse.wheel(0, -400)
    expect(label).not_to_have_text(whole, timeout=5_000)
    zoomed = label.inner_text()
    assert "showing 0 ns" not in zoomed, zoomed
    # Drag to pan: the window moves, its width kept.
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    expect(label).not_to_have_text(zoomed, timeout=5_000)

    # The recompile finding opens its graphs: the change names the varying dimension and
    # the cell's line, and the changed input is marked in both columns.
    view.locator(".xp-finding.xp-linked", has_text="recompile").first.click()
    changes = view.locator(".xp-changes")
    expect(changes).to_contain_text("dimension 0 went from 16 to 4", timeout=30_000)
    expect(changes).to_contain_text("`x` made at In[2]:11")  # the cell's variable, though no file
    expect(view.locator(".xp-col .xp-input.xp-mark")).to_have_count(2)

    # A sync (or its compile or execution) on the timeline opens its graph: op counts,
    # nodes with lines, its HLO.
    view.locator(".xp-reset").click()
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()  # the diff scrolled the page
    tip = view.locator(".xp-tip")
    hit = False
    for x in range(2, int(box["width"]) - 2, 2):
        page.mouse.move(box["x"] + x, box["y"] + 18 + 2 * 22 + 11)  # the syncs lane
        if tip.is_visible() and re.match(r"(sync|compile|execute): .*[0-9a-f]{16}", tip.inner_text()):
            hit = True
            break
    assert hit, "no sync found on the syncs lane"
    page.mouse.down()
    page.mouse.up()
    expect(view.locator(".xp-diff h4")).to_contain_text(re.compile(r"Graph [0-9a-f]{16}: \d+ nodes"), timeout=30_000)
    expect(view.locator(".xp-diff .xp-ops")).to_contain_text("dot_general")
    expect(view.locator(".xp-diff .xp-hlo summary").first).to_have_text("StableHLO")

    # The line profiler: the batch's line made an input of every step's graph, the loss's line
    # recorded ops and took host time recording them, the step's line forced every sync.
    view.locator(".xp-source > summary").click()
    rows = view.locator(".xp-lines tr.xp-line")
    batch = rows.filter(has_text="x = data[step * 16")
    expect(batch).to_have_count(1)
    expect(batch.locator("td").nth(3)).to_have_text("8")
    loss = rows.filter(has_text="loss = model(x).square().mean()")
    assert int(loss.locator("td").nth(1).inner_text()) > 0
    expect(loss.locator("td").nth(2)).to_have_text(re.compile(r"^[0-9.]+ (ns|µs|ms|s)$"))
    sync_line = rows.filter(has_text="xt.step()")
    expect(sync_line.locator("td").nth(4)).to_have_text("8")

    # Two profiles side by side: what `xlaprof diff` prints, then each profile's own view; a
    # finding of A opens A's graphs, in A's column.
    compare = page.locator(".xp-compare")
    expect(compare).to_have_count(1, timeout=120_000)
    expect(compare.locator(".xp-diff-report")).to_contain_text("step time (median)")
    expect(compare.locator(".xp-diff-report")).to_contain_text("B: no ragged batch")
    expect(compare.locator(".xp-compare-side .xp-w")).to_have_count(2)
    a, b = compare.locator(".xp-compare-side").nth(0), compare.locator(".xp-compare-side").nth(1)
    expect(b.locator(".xp-w-head")).to_contain_text("no ragged batch")
    expect(b.locator(".xp-findings")).not_to_contain_text("recompile")
    a.locator(".xp-finding.xp-linked", has_text="recompile").first.click()
    expect(a.locator(".xp-changes")).to_contain_text("dimension 0 went from 16 to 4", timeout=30_000)
    expect(b.locator(".xp-changes")).to_have_count(0)

    # The loss read for the log: its finding shows the cell's line as it reads and as it would.
    summed = page.locator(".jp-Cell").nth(3).locator(".xp-w").last
    fix = summed.locator(".xp-finding", has_text="hidden sync").locator(".xp-fix")
    expect(fix).to_have_text("- total += loss.item()  # summed for the log\n+ total += loss.detach()",
                             timeout=120_000)
    fix.scroll_into_view_if_needed()  # for the screenshot
