//! The terminal UI's figures on a profile of about a million events recorded from the real
//! engine: model build time and memory, frame time of each view, and the latency from records
//! being written to them being on screen while following.
//!
//!     cargo bench -p xlaprof --bench tui [-- EVENTS]

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::Terminal;
use xlaprof_profiler::{Recording, Thresholds};

use xlaprof::tui::{frame, App, Tab, POLL};
use xlaprof::viewer::Source;

type Error = Box<dyn std::error::Error>;

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

/// Median milliseconds to draw the current view `reps` times into a `w`x`h` screen.
fn frame_ms(app: &App, w: u16, h: u16, reps: usize) -> Result<f64, Error> {
    let mut terminal = Terminal::new(TestBackend::new(w, h))?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        terminal.draw(|f| frame(f, app))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}

/// Records `steps` tiny steps (7 events each) to `path`.
fn record(path: &Path, steps: usize) -> Result<u64, Error> {
    let recording = Recording::to_file(path)?;
    xlaprof_samples::tiny_steps(steps)?;
    Ok(recording.stop().records)
}

fn main() -> Result<(), Error> {
    // `cargo bench` passes `--bench`; the first number is the event count.
    let events: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("xlaprof-bench-tui-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let big = dir.join("big.xlaprof");
    let t = Instant::now();
    let records = record(&big, (events / 7) as usize)?;
    println!("recorded {records} events from the engine in {:.1} s", t.elapsed().as_secs_f64());

    let before = rss_mib();
    let t = Instant::now();
    let mut app = App::new(Source::open(&big), Thresholds::default());
    println!(
        "open: read + analysis + view model   {:>8.0} ms, UI memory {:.0} MiB",
        t.elapsed().as_secs_f64() * 1e3,
        rss_mib() - before
    );
    for tab in Tab::ALL {
        app.tab = tab;
        let big_screen = frame_ms(&app, 200, 50, 30)?;
        let small = frame_ms(&app, 80, 24, 30)?;
        println!("frame {:<12} 200x50 {big_screen:>7.2} ms   80x24 {small:>7.2} ms", tab.title());
    }
    app.tab = Tab::Timeline;
    app.on_key(KeyEvent::from(KeyCode::Char('m')));
    println!("frame Timeline, zoomed to a step, 200x50 {:>7.2} ms", frame_ms(&app, 200, 50, 30)?);
    app.tab = Tab::Graphs;
    app.on_key(KeyEvent::from(KeyCode::Enter));
    println!("frame Graph detail, 200x50           {:>7.2} ms", frame_ms(&app, 200, 50, 30)?);
    drop(app);

    // Following: another thread appends the rest of a real profile in small pieces while the
    // UI's loop polls as it does on a terminal; latency is from a write to the frame showing it.
    let big_name = format!("{records}-event live profile");
    for (name, steps) in [("small live profile", 2_000usize), (big_name.as_str(), 0)] {
        let source_file = if steps == 0 { big.clone() } else { dir.join("small.xlaprof") };
        if steps > 0 {
            record(&source_file, steps)?;
        }
        let bytes = std::fs::read(&source_file)?;
        let growing = dir.join("growing.xlaprof");
        let head = bytes.len() * 9 / 10;
        std::fs::write(&growing, &bytes[..head])?;
        let mut app = App::new(Source::follow(&growing), Thresholds::default());
        let mut terminal = Terminal::new(TestBackend::new(120, 40))?;
        let (tx, rx) = std::sync::mpsc::channel::<Instant>();
        let tail = bytes[head..].to_vec();
        let path = growing.clone();
        let writer = std::thread::spawn(move || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
            for piece in tail.chunks(tail.len().div_ceil(20)) {
                std::thread::sleep(Duration::from_millis(150));
                f.write_all(piece)?;
                f.flush()?;
                let _ = tx.send(Instant::now());
            }
            Ok(())
        });
        let mut latencies = Vec::new();
        let mut pending: Vec<Instant> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while latencies.len() < 20 && Instant::now() < deadline {
            std::thread::sleep(POLL);
            pending.extend(rx.try_iter());
            if app.tick() {
                terminal.draw(|f| frame(f, &app))?;
                let now = Instant::now();
                latencies.extend(pending.drain(..).map(|w| (now - w).as_secs_f64() * 1e3));
            }
        }
        writer.join().map_err(|_| "writer thread")??;
        latencies.sort_by(f64::total_cmp);
        if let (Some(mid), Some(max)) = (latencies.get(latencies.len() / 2), latencies.last()) {
            println!("follow latency, {name:<29} median {mid:>6.0} ms, max {max:>6.0} ms");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
