//! End to end: `xlaprof gui` on a profile recorded by the real engine, in a virtual X server
//! (Xvfb, with Mesa's software OpenGL), screenshotted from outside with `xwd`; the test checks the
//! screen shows a rendered window, not a blank one. `bash scripts/setup.sh` installs Xvfb and xwd.
//!
//! `XLAPROF_SCREENSHOT_OUT=docs/gui.png` keeps the screenshot (as PNG), and
//! `XLAPROF_SCREENSHOT_PROFILE=FILE` shows another profile (how docs/gui.png is made).

#[path = "support/process.rs"]
mod process;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use process::{which, Running};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 800;

/// Starts Xvfb on a free display (it picks one and tells us through `-displayfd`).
fn start_xvfb() -> (Running, String) {
    let xvfb = which("Xvfb").expect("Xvfb is not installed: run `bash scripts/setup.sh`");
    let mut child = Command::new(xvfb)
        .args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            &format!("{WIDTH}x{HEIGHT}x24"),
            "-br",
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start Xvfb");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("Xvfb display number");
    let display = format!(":{}", line.trim());
    assert!(line.trim().parse::<u32>().is_ok(), "Xvfb did not report a display: {line:?}");
    (Running(child), display)
}

/// An RGB image decoded from `xwd` output (32 bits per pixel, the format Xvfb's 24-bit screen
/// gives).
struct Image {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
}

fn decode_xwd(bytes: &[u8]) -> Result<Image, String> {
    // The header: 25 big-endian 32-bit fields (X11's XWDFileHeader), then the window name.
    let field = |i: usize| -> Result<u32, String> {
        let b = bytes.get(i * 4..i * 4 + 4).ok_or("xwd header is truncated")?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (header_size, width, height) = (field(0)? as usize, field(4)? as usize, field(5)? as usize);
    let (byte_order, bits_per_pixel, bytes_per_line) = (field(7)?, field(11)?, field(12)? as usize);
    let (red_mask, green_mask, blue_mask, colors) =
        (field(14)?, field(15)?, field(16)?, field(19)? as usize);
    if bits_per_pixel != 32 {
        return Err(format!("xwd: {bits_per_pixel} bits per pixel is not handled"));
    }
    let data = bytes.get(header_size + colors * 12..).ok_or("xwd: no pixel data")?;
    if data.len() < bytes_per_line * height {
        return Err("xwd: pixel data is truncated".into());
    }
    let channel = |p: u32, mask: u32| ((p & mask) >> mask.trailing_zeros()) as u8;
    let mut rgb = Vec::with_capacity(width * height);
    for y in 0..height {
        for x in 0..width {
            let b = &data[y * bytes_per_line + x * 4..][..4];
            let p = if byte_order == 0 {
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            } else {
                u32::from_be_bytes([b[0], b[1], b[2], b[3]])
            };
            rgb.push([channel(p, red_mask), channel(p, green_mask), channel(p, blue_mask)]);
        }
    }
    Ok(Image { width, height, rgb })
}

fn screenshot(display: &str) -> Result<Image, String> {
    let xwd = which("xwd").ok_or("xwd is not installed: run `bash scripts/setup.sh`")?;
    let out = Command::new(xwd)
        .args(["-root", "-silent", "-display", display])
        .output()
        .map_err(|e| format!("xwd: {e}"))?;
    if !out.status.success() {
        return Err(format!("xwd failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    decode_xwd(&out.stdout)
}

/// How many distinct colours, and the share of pixels that are not the screen's black background
/// (Xvfb runs with `-br`; egui's darkest fill is not pure black).
fn content(image: &Image) -> (usize, f64) {
    let colours: std::collections::HashSet<[u8; 3]> = image.rgb.iter().copied().collect();
    let black = image.rgb.iter().filter(|p| **p == [0, 0, 0]).count();
    (colours.len(), 1.0 - black as f64 / image.rgb.len().max(1) as f64)
}

/// A running `xlaprof gui` and its private home. Fields drop in the order they are declared:
/// the process is killed and waited for before its home is removed.
struct Gui {
    process: Running,
    _home: tempfile::TempDir,
}

/// Starts `xlaprof gui` (with the arguments `args` adds) on `display`, with software OpenGL and a
/// private home (`name` tells tests apart), so a test neither reads nor writes the user's saved
/// settings.
fn start_gui(display: &str, name: &str, args: impl FnOnce(&mut Command) -> &mut Command) -> Gui {
    let home = tempfile::Builder::new().prefix(&format!("xlaprof-gui-{name}-")).tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_xlaprof"));
    args(command.arg("gui"))
        .env("DISPLAY", display)
        .env_remove("WAYLAND_DISPLAY")
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    Gui { process: Running(command.spawn().expect("start xlaprof gui")), _home: home }
}

fn write_png(path: &Path, image: &Image) {
    let file = std::fs::File::create(path).expect("create the PNG");
    let mut encoder =
        png::Encoder::new(std::io::BufWriter::new(file), image.width as u32, image.height as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(&image.rgb.concat()).unwrap();
    writer.finish().unwrap();
}

#[test]
fn gui_renders_a_recorded_profile_under_xvfb() {
    let profile =
        std::env::var_os("XLAPROF_SCREENSHOT_PROFILE").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data/profile-v1.xlaprof")
        });
    let (_xvfb, display) = start_xvfb();
    let mut gui = start_gui(&display, "xvfb", |c| c.arg(&profile));

    // Wait for a rendered window: many colours, and most of the screen covered.
    let deadline = Instant::now() + Duration::from_secs(60);
    let image = loop {
        if let Some(status) = gui.process.0.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(gui.process.0.stderr.as_mut().unwrap(), &mut err).ok();
            panic!("xlaprof gui exited ({status}) before rendering: {err}");
        }
        std::thread::sleep(Duration::from_millis(700));
        let image = screenshot(&display).expect("screenshot");
        let last = content(&image);
        // Text, tracks and panels give hundreds of colours once egui has drawn; the empty X
        // screen is one black.
        if last.0 >= 64 && last.1 >= 0.5 {
            // One more frame, so what we keep is the settled window.
            std::thread::sleep(Duration::from_millis(700));
            break screenshot(&display).expect("screenshot");
        }
        assert!(
            Instant::now() < deadline,
            "the window never rendered: {last:?} (colours, share not background)"
        );
    };
    assert_eq!((image.width, image.height), (WIDTH as usize, HEIGHT as usize));
    let (colours, covered) = content(&image);
    assert!(
        colours >= 64 && covered >= 0.5,
        "blank screen: {colours} colours, {covered:.2} covered"
    );

    let out = std::env::var_os("XLAPROF_SCREENSHOT_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gui-xvfb.png"));
    write_png(&out, &image);
}

/// File > Export > PNG screenshot, through `--screenshot` (the same code path): the window reads
/// its own framebuffer back and writes a PNG, then quits.
#[test]
fn gui_writes_its_own_png_screenshot_under_xvfb() {
    let profile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data/profile-v1.xlaprof");
    let (_xvfb, display) = start_xvfb();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gui-self-screenshot.png");
    let _ = std::fs::remove_file(&out);
    let mut gui = start_gui(&display, "png", |c| c.arg(&profile).arg("--screenshot").arg(&out));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = gui.process.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "xlaprof gui --screenshot did not quit");
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(gui.process.0.stderr.as_mut().unwrap(), &mut err).ok();
    assert!(status.success(), "{status}: {err}");
    let decoder =
        png::Decoder::new(BufReader::new(std::fs::File::open(&out).expect("the PNG was written")));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    let rgb: Vec<[u8; 3]> =
        pixels[..info.buffer_size()].chunks(4).map(|p| [p[0], p[1], p[2]]).collect();
    let image = Image { width: info.width as usize, height: info.height as usize, rgb };
    assert!(image.width >= 640 && image.height >= 400, "{}x{}", image.width, image.height);
    let (colours, covered) = content(&image);
    assert!(
        colours >= 64 && covered >= 0.5,
        "blank screenshot: {colours} colours, {covered:.2} covered"
    );
}
