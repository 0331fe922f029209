"""The notebook view's speed on large profiles, in the system Chromium (Playwright).

For profiles of 100k and 1M records (`profiler/examples/synthetic_profile.rs`), prints:
- the Python side of opening the view: loading the profile, the view's first state (the analysis,
  the overview bars), and one zoomed window summarized in Rust;
- the JavaScript side: the first paint (the view built and drawn from its state) and the frame
  of a wheel zoom (drawn at once from the bars at hand), medians of 20, and the time until the
  window's own bars arrive from Python and are drawn.

The view runs in a page of its own with a stand-in for the widget's model (its state, and its
messages answered by the view's own Python handler): what is measured is the view, not
Jupyter's transport. Run: `.venv/bin/python notebook_ext/bench/view.py`
"""

from __future__ import annotations

import functools
import http.server
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import xlaprof as xp
from playwright.sync_api import sync_playwright
from xlaprof import _widget

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIZES = {"100k": 16_667, "1M": 166_667}  # steps: six records each

PAGE = """<!doctype html><meta charset="utf-8"><link rel="stylesheet" href="profile.css">
<div id="host" style="width:1200px"></div>
<script type="module">
import view from "./profile.js";
const state = await (await fetch("state.json")).json();
const listeners = {};
const model = {
  get: (k) => state[k],
  on: (ev, cb) => (listeners[ev] ||= []).push(cb),
  send: async (msg) => {
    const reply = JSON.parse(await window.answer(JSON.stringify(msg)));
    for (const cb of listeners["msg:custom"] || []) cb(reply);
    window.lastReply = performance.now();
  },
};
const host = document.getElementById("host");
const t0 = performance.now();
view.render({ model, el: host });
await new Promise((r) => requestAnimationFrame(() => r()));
window.firstPaint = performance.now() - t0;
const canvas = host.querySelector("canvas");
window.zoom = async () => {
  const r = canvas.getBoundingClientRect();
  const frames = [];
  for (let i = 0; i < 20; i++) {
    const ev = new WheelEvent("wheel", { deltaY: -120, clientX: r.left + r.width * 0.4, clientY: r.top + 30, cancelable: true });
    const t = performance.now();
    canvas.dispatchEvent(ev);
    frames.push(performance.now() - t);
  }
  const asked = performance.now();
  window.lastReply = 0;
  while (!window.lastReply) await new Promise((r) => setTimeout(r, 5));
  return { frames, refined: window.lastReply - asked };
};
window.ready = true;
</script>"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def synthetic(steps: int, out: pathlib.Path) -> None:
    exe = ROOT / "target" / "release" / "examples" / "synthetic_profile"
    if not exe.exists():
        subprocess.run(["cargo", "build", "--release", "-p", "xlaprof-profiler", "--example", "synthetic_profile"],
                       cwd=ROOT, check=True)
    subprocess.run([str(exe), str(steps), str(out)], check=True, capture_output=True)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("Chromium is not installed")


def measure(name: str, steps: int, folder: pathlib.Path, browser) -> None:
    path = folder / f"{name}.xlaprof"
    synthetic(steps, path)
    t0 = time.perf_counter()
    p = xp.load(str(path))
    t1 = time.perf_counter()
    w = p.view()
    t2 = time.perf_counter()
    first, last = w.extent
    t3 = time.perf_counter()
    p._data().timeline(first + (last - first) // 3, first + (last - first) // 3 + (last - first) // 10, 1200)
    t4 = time.perf_counter()
    site = folder / name
    site.mkdir()
    for f in ("profile.js", "profile.css"):
        shutil.copy(pathlib.Path(_widget.__file__).parent / "widget" / f, site / f)
    state = {k: getattr(w, k) for k in ("title", "summary", "live", "findings", "extent", "lanes", "bars", "lines")}
    (site / "state.json").write_text(json.dumps(state))
    (site / "index.html").write_text(PAGE)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    sent = []
    w.send = lambda content, buffers=None: sent.append(content)  # the view's replies, kept here

    def answer(message: str) -> str:
        w._on_message(w, json.loads(message), [])
        return json.dumps(sent.pop())

    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.expose_function("answer", answer)
    page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
    page.wait_for_function("window.ready === true", timeout=60_000)
    paint = page.evaluate("window.firstPaint")
    zoom = page.evaluate("window.zoom()")
    page.close()
    server.shutdown()
    frames = zoom["frames"]
    print(f"{name:>5} records  load {1e3 * (t1 - t0):7.1f} ms  view state {1e3 * (t2 - t1):6.1f} ms  "
          f"window in Rust {1e3 * (t4 - t3):5.1f} ms  |  first paint {paint:6.1f} ms  "
          f"zoom frame median {statistics.median(frames):5.2f} ms, max {max(frames):5.2f} ms  "
          f"its window's bars drawn {zoom['refined']:6.1f} ms later (60 ms of it waiting for the wheel to rest)  ({len(w.bars)} bars)")


def main() -> None:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="xlaprof-view-bench-"))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            for name, steps in SIZES.items():
                measure(name, steps, folder, browser)
            browser.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
