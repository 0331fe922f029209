// The interactive profile view (an anywidget module): a canvas timeline that zooms and pans (a
// sync opens its graph), the findings (a recompile opens its two graphs side by side), and the
// source lines with what the engine did for each. Everything it shows is computed in Rust: the
// timeline arrives as bars already summarized for the window and its width (a million spans
// draw as fast as a hundred), a diff as sentences and node lists. Text from the program is only
// ever set as text (textContent, canvas text), never parsed as markup.

const LANE_H = 22;
const ROW_H = 6;
const AXIS_H = 18;
const COLORS = {
  step: "#c7d7ee", scope: "#d9c7ee", sync: "#9fb8d8", "graph build": "#b8d8a0", lower: "#e0d090",
  compile: "#e07b5f", execute: "#5fa8e0", "transfer to device": "#a0a0a0", "host read": "#e0a040",
  device: "#60c0a0", "torch.compile": "#c080c0", "compile phase": "#d8a8d8", "compiled graph": "#5f7fe0",
  "CPU fallback": "#d04080", "waiting for data": "#b0b0b0", collective: "#9a5ad0",
};

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function formatNs(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
  return Math.round(ns) + " ns";
}

// The window after a wheel step of `delta` at fraction `at` of the width (zoom about the cursor),
// kept inside the profile and at least 1 µs wide.
export function zoomed(view, extent, at, delta) {
  const [v0, v1] = view;
  const factor = Math.exp(delta * 0.0015);
  const width = Math.min(Math.max((v1 - v0) * factor, 1000), extent[1] - extent[0] || 1000);
  const center = v0 + (v1 - v0) * at;
  let start = center - width * at;
  start = Math.max(extent[0], Math.min(start, extent[1] - width));
  return [start, start + width];
}

export function panned(view, extent, fraction) {
  const width = view[1] - view[0];
  let start = view[0] - fraction * width;
  start = Math.max(extent[0], Math.min(start, extent[1] - width));
  return [start, start + width];
}

// One profile's view in `host`; `model` gives its state (`get`, `on`) and takes its requests.
function renderProfile(model, host) {
  const root = el("div", "xp-w");
  const head = el("div", "xp-w-head");
  const title = el("span", "xp-w-title");
  const live = el("span", "xp-w-live");
  head.append(title, live);
  const summary = el("pre", "xp-w-summary");
  const bar = el("div", "xp-w-bar");
  const windowLabel = el("span", "xp-window");
  const reset = el("button", "xp-reset", "whole profile");
  const hint = el("span", "xp-hint", "wheel: zoom · drag: pan · click a sync: its graph · click a finding: its graphs");
  bar.append(windowLabel, reset, hint);
  const canvas = el("canvas", "xp-canvas");
  const tip = el("div", "xp-tip");
  const stage = el("div", "xp-stage");
  stage.append(canvas, tip);
  const findings = el("ol", "xp-findings");
  const diff = el("div", "xp-diff");
  const source = el("details", "xp-source");
  root.append(head, summary, bar, stage, el("h4", "", "Findings"), findings, diff, source);
  host.append(root);

  let extent = model.get("extent");
  let view = extent.slice();
  let bars = model.get("bars");
  let following = true;  // the view is the whole profile (live updates keep it so)
  let seq = 0;
  let pending = null;

  function lanes() { return model.get("lanes"); }
  function width() { return Math.max(300, Math.floor(root.clientWidth || host.clientWidth || 900)); }

  function draw() {
    const w = width();
    const rows = lanes().length;
    const h = AXIS_H + rows * LANE_H;
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== w * dpr || canvas.height !== h * dpr) {
      canvas.width = w * dpr; canvas.height = h * dpr;
      canvas.style.width = w + "px"; canvas.style.height = h + "px";
    }
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = "11px monospace";
    const [v0, v1] = view;
    const scale = w / Math.max(v1 - v0, 1);
    lanes().forEach((name, i) => {
      g.fillStyle = i % 2 ? "#fafafa" : "#f2f2f2";
      g.fillRect(0, AXIS_H + i * LANE_H, w, LANE_H);
    });
    for (const b of bars) {
      const [lane, depth, kind, s, e, count] = b;
      if (e < v0 || s > v1) continue;
      const x = (s - v0) * scale;
      const bw = Math.max((e - s) * scale, 1);
      const y = AXIS_H + lane * LANE_H + 2 + Math.min(depth, 2) * ROW_H;
      g.fillStyle = COLORS[kind] || "#888";
      g.globalAlpha = count > 1 ? 0.65 : 1;
      g.fillRect(x, y, bw, LANE_H - 4 - Math.min(depth, 2) * ROW_H);
    }
    g.globalAlpha = 1;
    g.fillStyle = "#333";
    lanes().forEach((name, i) => g.fillText(name, 4, AXIS_H + i * LANE_H + 14));
    for (let k = 0; k <= 4; k++) {
      const t = v0 + ((v1 - v0) * k) / 4;
      const x = Math.min(Math.max((k * w) / 4, 2), w - 60);
      g.fillText(formatNs(t - extent[0]), x, 12);
    }
    windowLabel.textContent =
      `showing ${formatNs(view[0] - extent[0])} – ${formatNs(view[1] - extent[0])} of ${formatNs(extent[1] - extent[0])}`;
  }

  // Asks Rust for the bars of the window now shown, once the wheel or the drag rests.
  function refine() {
    clearTimeout(pending);
    pending = setTimeout(() => {
      seq += 1;
      model.send({ type: "window", seq, start: Math.floor(view[0]), end: Math.ceil(view[1]), columns: width() });
    }, 60);
  }

  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    view = zoomed(view, extent, (ev.clientX - r.left) / r.width, ev.deltaY);
    following = false;
    draw();
    refine();
  }, { passive: false });

  let drag = null;
  let moved = false;
  const barAt = (ev) => {
    const r = canvas.getBoundingClientRect();
    const t = view[0] + ((ev.clientX - r.left) / r.width) * (view[1] - view[0]);
    const lane = Math.floor((ev.clientY - r.top - AXIS_H) / LANE_H);
    // The innermost bar under the cursor: a phase before its sync.
    let hit = null;
    for (const b of bars) {
      if (b[0] === lane && b[3] <= t && t <= b[4] && (!hit || b[1] > hit[1])) hit = b;
    }
    return hit;
  };
  canvas.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, view: view.slice() }; moved = false; });
  window.addEventListener("mouseup", () => { drag = null; });
  canvas.addEventListener("click", (ev) => {
    if (moved) return;
    const hit = barAt(ev);
    if (hit && hit[7]) {
      diff.replaceChildren(el("div", "xp-wait", "reading its graph…"));
      model.send({ type: "graph", hash: hit[7] });
    }
  });
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    if (drag && Math.abs(ev.clientX - drag.x) > 2) moved = true;
    if (drag && moved) {
      view = panned(drag.view, extent, (ev.clientX - drag.x) / r.width);
      following = false;
      draw();
      refine();
      return;
    }
    const hit = barAt(ev);
    tip.style.display = hit ? "block" : "none";
    if (hit) {
      tip.textContent = `${hit[2]}: ${hit[6]} · ${formatNs(hit[4] - hit[3])}`;
      tip.style.left = Math.min(ev.clientX - r.left + 12, r.width - 260) + "px";
      tip.style.top = ev.clientY - r.top + 12 + "px";
    }
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  reset.addEventListener("click", () => { view = extent.slice(); following = true; draw(); refine(); });

  function showFindings() {
    findings.replaceChildren();
    model.get("findings").forEach((f, i) => {
      const item = el("li", "xp-finding");
      item.append(el("b", "", `[${f.title}] `), el("span", "", f.message));
      if (f.advice) item.append(el("div", "xp-advice", "advice: " + f.advice));
      if (f.fix) {
        item.append(el("div", "xp-advice", `change ${f.fix.at}:`),
                    el("pre", "xp-fix", `- ${f.fix.before.trim()}\n+ ${f.fix.after.trim()}`));
      }
      if (f.graphs.length >= 2) {
        item.classList.add("xp-linked");
        item.addEventListener("click", () => {
          diff.replaceChildren(el("div", "xp-wait", "comparing its graphs…"));
          model.send({ type: "diff", index: i });
        });
      }
      findings.append(item);
    });
    if (!model.get("findings").length) findings.append(el("li", "", "no findings"));
  }

  function column(graph, label, mark) {
    const col = el("div", "xp-col");
    const shown = graph.nodes.length < graph.total
      ? ` (nodes ${graph.first}-${graph.first + graph.nodes.length - 1} shown)` : "";
    col.append(el("div", "xp-col-head", `${label}: graph ${graph.hash}, ${graph.total} nodes${shown}`));
    const list = el("ul", "xp-nodes");
    graph.inputs.forEach((inp, k) => {
      const row = el("li", "xp-input", `input ${k}: ${inp[0]}${inp[1] ? " `" + inp[1] + "`" : ""} · ${inp[2]}`);
      if (mark.inputs.has(k)) row.classList.add("xp-mark");
      col.append(row);
    });
    graph.nodes.forEach(([text, at], k) => {
      const row = el("li", "xp-node");
      row.append(el("code", "", text), el("span", "xp-at", "  @ " + at));
      if (mark.node === graph.first + k) row.classList.add("xp-mark");
      list.append(row);
    });
    col.append(list);
    return col;
  }

  function showDiff(msg) {
    diff.replaceChildren();
    if (!msg.a) {
      diff.append(el("div", "", "these graphs are not in the profile"));
      return;
    }
    diff.append(el("h4", "", "What changed"));
    const changes = el("ul", "xp-changes");
    const mark = { inputs: new Set(), node: -1 };
    for (const c of msg.changes) {
      changes.append(el("li", "", c.sentence));
      if (c.input !== undefined) mark.inputs.add(c.input);
      if (c.node !== undefined && mark.node < 0) mark.node = c.node;
    }
    diff.append(changes);
    const sides = el("div", "xp-sides");
    sides.append(column(msg.a, "before", mark), column(msg.b, "after", mark));
    diff.append(sides);
    const marked = diff.querySelector(".xp-node.xp-mark");
    if (marked) marked.scrollIntoView({ block: "nearest" });
  }

  function showGraph(msg) {
    diff.replaceChildren();
    const g = msg.graph;
    if (!g) {
      diff.append(el("div", "", "this graph is not in the profile"));
      return;
    }
    diff.append(el("h4", "", `Graph ${g.hash}: ${g.total} nodes, run ${g.executions} times, compiled in ${formatNs(g.compile_ns)}`));
    diff.append(el("div", "xp-ops", g.ops.map(([op, n]) => `${op} ×${n}`).join(" · ")));
    diff.append(column(g, "nodes", { inputs: new Set(), node: -1 }));
    for (const [key, label] of [["stablehlo", "StableHLO"], ["optimized_hlo", "optimized HLO"]]) {
      if (!g[key]) continue;
      const box = el("details", "xp-hlo");
      box.append(el("summary", "", label), el("pre", "", g[key]));
      diff.append(box);
    }
  }

  // The line profiler: each line the engine did something for, with what it did.
  function showSource() {
    source.replaceChildren(el("summary", "", "Source lines: ops recorded, tracing time, graph inputs made, syncs, compiles, bytes"));
    const rows = model.get("lines");
    const most = Math.max(1, ...rows.map((r) => r[3]));
    let file = null;
    let table = null;
    for (const [f, line, text, ops, inputs, syncs, compiles, compileNs, reads, bytes, fallbacks, traceNs] of rows) {
      if (f !== file) {
        file = f;
        source.append(el("div", "xp-file", f));
        table = el("table", "xp-lines");
        const head = el("tr");
        for (const h of ["line", "ops", "tracing", "inputs", "syncs", "compiles", "reads", "bytes", "fallbacks", "code"]) {
          head.append(el("th", "", h));
        }
        table.append(head);
        source.append(table);
      }
      const tr = el("tr", syncs || compiles || fallbacks ? "xp-line xp-hot" : "xp-line");
      const heat = el("td", "xp-num", String(ops));
      heat.style.background = `linear-gradient(90deg, #cfe3ff ${(100 * ops) / most}%, transparent 0)`;
      tr.append(el("td", "xp-num", String(line)), heat, el("td", "xp-num", traceNs ? formatNs(traceNs) : ""),
        el("td", "xp-num", String(inputs)), el("td", "xp-num", String(syncs)),
        el("td", "xp-num", compiles ? `${compiles} (${formatNs(compileNs)})` : "0"), el("td", "xp-num", String(reads)),
        el("td", "xp-num", String(bytes)), el("td", "xp-num", String(fallbacks)), el("td", "xp-code", text));
      table.append(tr);
    }
  }

  model.on("msg:custom", (msg) => {
    if (msg.type === "window" && msg.seq === seq) {
      bars = msg.bars;
      draw();
    } else if (msg.type === "diff") {
      showDiff(msg);
    } else if (msg.type === "graph") {
      showGraph(msg);
    }
  });
  model.on("change:extent", () => {
    extent = model.get("extent");
    if (following) view = extent.slice();
  });
  model.on("change:bars", () => {
    if (following) bars = model.get("bars");
    draw();
  });
  model.on("change:findings", showFindings);
  model.on("change:lines", showSource);
  const text = () => {
    title.textContent = model.get("title");
    summary.textContent = model.get("summary");
    live.textContent = model.get("live") ? " ● recording" : "";
  };
  model.on("change:summary", text);
  model.on("change:live", text);
  text();
  showFindings();
  showSource();
  draw();
  // Laid out later, or resized (a column, a narrower window): drawn again at its width.
  const resized = new ResizeObserver(() => draw());
  resized.observe(root);
  return () => { clearTimeout(pending); resized.disconnect(); };
}

// Two profiles side by side (`xp.compare(a, b)`): the comparison `xlaprof diff` prints, then each
// profile's own view over its half of the state (`a_…`, `b_…`), its requests tagged with its side.
function renderCompare(model, host) {
  const root = el("div", "xp-compare");
  root.append(el("h4", "", "A against B"), el("pre", "xp-diff-report", model.get("diff")));
  const sides = el("div", "xp-compare-sides");
  root.append(sides);
  host.append(root);
  const side = (p) => ({
    get: (k) => model.get(`${p}_${k}`),
    on: (ev, cb) => (ev === "msg:custom"
      ? model.on(ev, (msg) => { if (msg.side === p) cb(msg); })
      : model.on(ev.replace("change:", `change:${p}_`), cb)),
    send: (msg) => model.send({ ...msg, side: p }),
  });
  const cleanups = ["a", "b"].map((p) => {
    const column = el("div", "xp-compare-side");
    column.append(el("div", "xp-compare-label", p.toUpperCase()));
    sides.append(column);
    return renderProfile(side(p), column);
  });
  return () => cleanups.forEach((c) => c());
}

function render({ model, el: host }) {
  return model.get("kind") === "compare" ? renderCompare(model, host) : renderProfile(model, host);
}

export default { render };
