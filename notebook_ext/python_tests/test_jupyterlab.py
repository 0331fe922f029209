"""The interactive view in a real JupyterLab, driven by Playwright in the system Chromium: a torch
training cell under `%%xla_profile` shows the view while it runs (steps appear before the cell
ends), then the finished profile, whose timeline zooms under the wheel and whose recompile
finding opens its two graphs with the changed input marked."""

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
        page.goto(lab)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        # The kernel is up when the status bar says so; then both cells run.
        expect(page.locator(".jp-StatusBar-TextItem", has_text="Idle").first).to_be_visible(timeout=90_000)
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")  # %load_ext
        page.keyboard.press("Shift+Enter")  # the training cell

        # Live: the view shows steps while the cell still runs.
        live = page.locator(".xp-w-live", has_text="recording")
        expect(live).to_have_count(1, timeout=90_000)
        expect(page.locator(".xp-w-summary").first).to_contain_text(re.compile(r"[1-9]\d* steps"), timeout=30_000)
        assert page.locator(".xp-w-live", has_text="recording").count() == 1, "the cell ended before a live update"

        # Finished: the live view gives way to the counts, the result is the interactive view.
        expect(page.get_by_text(re.compile(r"xlaprof: done in"))).to_have_count(1, timeout=120_000)
        view = page.locator(".xp-w").last
        # The static page beside it (for exports) is hidden where the view runs.
        expect(page.locator(".xlaprof-static-twin")).to_have_count(1)
        expect(page.locator(".xlaprof-static-twin")).to_be_hidden()
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
        expect(changes).to_contain_text(re.compile(r"In\[2\]:11"))
        expect(view.locator(".xp-col .xp-input.xp-mark")).to_have_count(2)
        page.screenshot(path=str(OUT), full_page=True)
        browser.close()
