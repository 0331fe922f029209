//! The desktop viewer's figures: memory and frame time with a profile of at least 1,000,000
//! events, and the time from launch to the first frame.
//!
//!     cargo bench -p xlaprof --bench gui [-- EVENTS] [--profile FILE]
//!
//! The large profile is recorded like the profiler bench's: the real engine runs tiny syncs
//! (an add and a step each) under a `Recording`. Frame time is the CPU time of one egui frame
//! (building every widget and tessellating the shapes, as eframe does before handing triangles to
//! OpenGL), measured on the panels as a user would see them; uploading and drawing the triangles
//! on the GPU is not included. Launch to first frame runs `xlaprof gui` under Xvfb when present.

#[path = "../tests/support/process.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use eframe::egui;
use process::{which, Running};
use xlaprof::gui;
use xlaprof_profiler::Recording;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Resident and peak memory of this process, in MiB (Linux `/proc/self/status`).
fn memory_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Records tiny syncs until the file holds at least `events` records.
fn record(path: &Path, events: u64) -> Result<u64> {
    // About 7 records per sync (begin, built, lookup, transfer, execute, end, step): a margin.
    let recording = Recording::to_file(path)?;
    xlaprof_samples::tiny_steps((events / 6 + 1000) as usize)?;
    Ok(recording.stop().records)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// CPU time of `frames` frames of `app` (median and 95th percentile, ms). Each frame moves the
/// pointer over the timeline and scrolls, so the view changes every frame.
fn frame_times(app: &mut gui::GuiApp, frames: usize, zoom: bool) -> (f64, f64) {
    let ctx = egui::Context::default();
    let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(1280.0, 800.0));
    let mut times = Vec::with_capacity(frames);
    for i in 0..frames {
        let mut input = egui::RawInput { screen_rect: Some(screen), ..Default::default() };
        input.time = Some(i as f64 / 60.0);
        let pointer = egui::pos2(300.0 + (i % 400) as f32, 200.0);
        input.events.push(egui::Event::PointerMoved(pointer));
        if zoom {
            input.events.push(egui::Event::MouseWheel {
                unit: egui::MouseWheelUnit::Point,
                delta: egui::vec2(0.0, if (i / 20) % 2 == 0 { 40.0 } else { -40.0 }),
                modifiers: egui::Modifiers::NONE,
                phase: egui::TouchPhase::Move,
                source: egui::MouseWheelSource::Wheel,
            });
        }
        let start = Instant::now();
        let output = ctx.run_ui(input, |ui| app.show(ui));
        let _triangles = ctx.tessellate(output.shapes, output.pixels_per_point);
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    // The first frames lay out fonts and fit the view: not what scrolling costs.
    let mut steady: Vec<f64> = times.split_off(frames.min(10));
    steady.sort_by(|a, b| a.total_cmp(b));
    (percentile(&steady, 0.5), percentile(&steady, 0.95))
}

/// Launch to first frame of `xlaprof gui FILE` under a fresh Xvfb: (wall ms, in-process ms).
fn launch_to_first_frame(file: &Path) -> Result<Vec<(f64, f64)>> {
    let Some(xvfb) = which("Xvfb") else {
        return Err("Xvfb not found (bash scripts/setup.sh installs it)".into());
    };
    // Killed when dropped: a failed run below returns early.
    let mut server = Running(
        Command::new(xvfb)
            .args(["-displayfd", "1", "-screen", "0", "1280x800x24", "-nolisten", "tcp"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.take().ok_or("no Xvfb stdout")?),
        &mut line,
    )?;
    let display = format!(":{}", line.trim());
    let home = std::env::temp_dir().join(format!("xlaprof-gui-bench-home-{}", std::process::id()));
    std::fs::create_dir_all(&home)?;
    let mut runs = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_xlaprof"))
            .arg("gui")
            .arg("--exit-after-first-frame")
            .arg(file)
            .env("DISPLAY", &display)
            .env_remove("WAYLAND_DISPLAY")
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("LIBGL_ALWAYS_SOFTWARE", "1")
            .output()?;
        let wall = start.elapsed().as_secs_f64() * 1e3;
        let text = String::from_utf8_lossy(&out.stdout);
        let inside = text
            .split_whitespace()
            .find_map(|w| w.parse::<f64>().ok())
            .ok_or_else(|| format!("no first frame: {}", String::from_utf8_lossy(&out.stderr)))?;
        runs.push((wall, inside));
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&home);
    Ok(runs)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let events: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1_000_000);
    let given =
        args.iter().position(|a| a == "--profile").and_then(|i| args.get(i + 1)).map(PathBuf::from);
    let dir = std::env::temp_dir().join(format!("xlaprof-gui-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = match given {
        Some(f) => f,
        None => {
            let f = dir.join("big.xlaprof");
            let t = Instant::now();
            let n = record(&f, events)?;
            println!(
                "recorded {n} events in {:.1} s ({:.1} MB)",
                t.elapsed().as_secs_f64(),
                std::fs::metadata(&f)?.len() as f64 / 1e6
            );
            f
        }
    };

    let (rss_before, _) = memory_mib();
    let t = Instant::now();
    let mut app = gui::GuiApp::new(gui::Settings::default());
    app.open(file.clone(), false);
    let open_s = t.elapsed().as_secs_f64();
    let model = app.model.as_ref().ok_or_else(|| {
        let reason = match &app.notice {
            Some(gui::Notice::Info(text) | gui::Notice::Error(text)) => text.as_str(),
            None => "no reason given",
        };
        format!("the profile did not open: {reason}")
    })?;
    let (rss_after, peak) = memory_mib();
    println!(
        "opened {} records, {} spans, {} steps in {open_s:.2} s (read, analyse, index)",
        model.profile.records,
        model.analysis.spans.len(),
        model.analysis.steps.len()
    );
    println!(
        "memory: {:.0} MiB resident for the open profile ({:.0} MiB process, peak {:.0} MiB)",
        rss_after - rss_before,
        rss_after,
        peak
    );

    for (tab, zoom, what) in [
        (gui::Tab::Timeline, false, "timeline, whole profile in view"),
        (gui::Tab::Timeline, true, "timeline, zooming in and out every frame"),
        (gui::Tab::Flamegraph, false, "flamegraph"),
        (gui::Tab::Plots, false, "plots (one point per step)"),
        (gui::Tab::Diagnostics, false, "diagnostics"),
    ] {
        app.settings.tab = tab;
        app.timeline = Default::default();
        let (median, p95) = frame_times(&mut app, 120, zoom);
        println!("frame time, {what:<42} median {median:>7.2} ms  p95 {p95:>7.2} ms");
    }

    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data/profile-v1.xlaprof");
    for (name, f) in
        [("small profile (golden)", golden.as_path()), ("1M-event profile", file.as_path())]
    {
        match launch_to_first_frame(f) {
            Ok(runs) => {
                let mut wall: Vec<f64> = runs.iter().map(|r| r.0).collect();
                let mut inside: Vec<f64> = runs.iter().map(|r| r.1).collect();
                wall.sort_by(|a, b| a.total_cmp(b));
                inside.sort_by(|a, b| a.total_cmp(b));
                println!(
                    "launch to first frame, {name}: median {:.0} ms from exec to exit, {:.0} ms from main to the first frame built (Xvfb, Mesa llvmpipe)",
                    percentile(&wall, 0.5),
                    percentile(&inside, 0.5)
                );
            }
            Err(e) => println!("launch to first frame, {name}: not measured: {e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
