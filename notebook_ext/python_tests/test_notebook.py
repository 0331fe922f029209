"""The sample notebook, run by a real Jupyter kernel; its widget checked in the outputs, then in
the HTML export rendered by headless Chromium."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import nbclient
import nbformat
import pytest
from nbconvert import HTMLExporter

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "samples" / "notebooks" / "mlp_profile.ipynb"


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()
    return nb


def outputs(nb, marker):
    """The outputs of the code cell whose source contains `marker`."""
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, marker
    return cells[0].outputs


def html_of(outs):
    return "".join(o["data"]["text/html"] for o in outs if "data" in o and "text/html" in o["data"])


def test_no_cell_failed(executed):
    for cell in executed.cells:
        for o in cell.get("outputs", []):
            assert o.output_type != "error", "".join(o.get("traceback", []))


def test_widget_shows_diagnostics_flamegraph_and_metrics(executed):
    outs = outputs(executed, "%%xla_profile --rules")
    html = html_of(outs)
    assert 'class="xlaprof-widget"' in html
    # Diagnostics point at the cell's lines, with the text of the line.
    assert "<summary>Diagnostics" in html and "hidden sync" in html
    assert "at In[3]:9 in &lt;module&gt;" in html  # the cell's own line number
    assert '<code class="xp-src">print(f&#39;step {i}: loss {loss.item():.3f}&#39;)</code>' in html
    assert "recompile" in html
    assert '<svg class="xp-flame"' in html and "where the time goes" in html
    assert 'class="xp-timeline"' in html
    assert "CompileTime" in html and "ExecuteTime" in html
    assert "Rules: 0 of 2 passed" in html
    assert "<script" not in html
    # Live progress: a display updated while the cell ran, left with the final counts.
    plain = [o["data"].get("text/plain", "") for o in outs if "data" in o]
    assert any(t.startswith("xlaprof: done in") for t in plain), plain
    # The result is the interactive view; the static page is its own output beside it.
    result = [o for o in outs if o.output_type == "execute_result"]
    assert len(result) == 1 and "application/vnd.jupyter.widget-view+json" in result[0]["data"], result
    assert "text/html" not in result[0]["data"] and 'class="xlaprof-static-twin"' in html


def test_profile_is_the_cell_result(executed):
    outs = outputs(executed, "p.to_polars('compiles')")
    text = "".join(o.get("text", "") for o in outs)
    assert "[hidden sync]" in text and "In[" in text
    assert any("data" in o and "text/html" in o["data"] for o in outs)  # the DataFrame


def test_no_widget_falls_back_to_text(executed):
    outs = outputs(executed, "--no-widget")
    results = [o for o in outs if o.output_type == "execute_result"]
    assert len(results) == 1
    assert set(results[0]["data"]) == {"text/plain"}
    assert results[0]["data"]["text/plain"].startswith("xlaprof report")
    assert "rule passed: no compiles after step 2" in results[0]["data"]["text/plain"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Chromium is not installed (scripts/setup_python.sh installs the Debian package)")


def test_exported_html_renders_in_chromium(executed, tmp_path):
    from PIL import Image

    body, _ = HTMLExporter().from_notebook_node(executed)
    # nbclient saved the widget state, so the export holds the view (which needs its scripts):
    # the static page is there beside it, whatever the exporter makes of the view.
    assert "widgets" in executed.metadata and 'class="xlaprof-widget"' in body
    page = tmp_path / "mlp_profile.html"
    page.write_text(body, encoding="utf-8")
    shot = tmp_path / "mlp_profile.png"
    profile_dir = tempfile.mkdtemp(prefix="xlaprof-chromium-")
    try:
        subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile_dir}", "--hide-scrollbars", "--window-size=1100,3000",
             f"--screenshot={shot}", page.as_uri()],
            check=True, timeout=120, capture_output=True,
        )
    finally:
        shutil.rmtree(profile_dir, ignore_errors=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1100, 3000)
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50, "the screenshot is blank"
    white = max(count for count, _ in colors)
    assert white < 0.97 * image.size[0] * image.size[1], "the screenshot is nearly empty"
    keep = os.environ.get("XLAPROF_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, pathlib.Path(keep) / "notebook-widget.png")
