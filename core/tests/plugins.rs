//! Choosing and starting a plugin: which create options reach it (`cpu_device_count` only the CPU
//! plugin, the user's from XLAPROF_PJRT_CREATE_OPTIONS any), XLAPROF_DEVICE and the lookup of a
//! CUDA plugin, and the plugin's log lines kept off stderr unless XLAPROF_DEBUG is set.
//!
//! Everything that depends on the environment runs in a child process (this test binary run
//! again on `child`), so no test changes the environment of another. Every plugin loaded here is
//! the real CPU plugin; the CUDA lookup is tested on fake site-packages trees and nothing pretends
//! to load what it finds there.

use std::path::{Path, PathBuf};
use std::process::Command;

use xlaprof_core::runtime::locate::{self, CUDA_PLUGINS};
use xlaprof_core::runtime::{
    parse_create_options, Client, ClientOptions, CompileOptions, DeviceKind, OptionValue, Plugin,
    PluginKind,
};
use xlaprof_core::{Error, Tensor};

const CHILD_ENV: &str = "XLAPROF_TEST_PLUGINS_CHILD";

/// The variables a child starts without, so the user's settings do not leak into the tests.
const CLEARED: [&str; 6] = [
    "XLAPROF_DEVICE",
    "XLAPROF_PJRT_PLUGIN",
    "XLAPROF_PJRT_CREATE_OPTIONS",
    "XLAPROF_DEBUG",
    "XLAPROF_PROFILE",
    "TF_CPP_MIN_LOG_LEVEL",
];

struct ChildRun {
    stdout: String,
    stderr: String,
}

impl ChildRun {
    /// What the child reported with `report`.
    fn result(&self) -> &str {
        self.stdout.lines().find_map(|l| l.strip_prefix("RESULT: ")).unwrap_or_else(|| {
            panic!("the child reported nothing:\n{}\n{}", self.stdout, self.stderr)
        })
    }
}

/// Runs `scenario` in a child process with `env` set (and `CLEARED` unset unless in `env`).
fn run_child(scenario: &str, env: &[(&str, &str)], cwd: Option<&Path>) -> ChildRun {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"]);
    for name in CLEARED {
        cmd.env_remove(name);
    }
    cmd.env(CHILD_ENV, scenario);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let out = cmd.output().unwrap();
    let run = ChildRun {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(out.status.success(), "child {scenario} failed:\n{}\n{}", run.stdout, run.stderr);
    run
}

fn report(result: Result<String, Error>) {
    match result {
        Ok(s) => println!("\nRESULT: ok {s}"),
        Err(e) => println!("\nRESULT: err {e:?} => {e}"),
    }
}

/// The body of each child process; a no-op in the normal test run.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else { return };
    match scenario.as_str() {
        // A client as the engine makes it, and its device count.
        "client" => report((|| {
            let plugin = Plugin::from_env()?;
            let client = Client::new(plugin, &ClientOptions::default().cpu_device_count(1))?;
            Ok(format!("devices={}", client.devices().len()))
        })()),
        // Which plugin the environment chooses (without loading it).
        "locate" => {
            report(xlaprof_core::runtime::default_plugin_path().map(|p| p.display().to_string()))
        }
        // A normal program on the engine; a line on stderr after it shows stderr still works.
        "engine" => {
            let result = (|| {
                let a = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3])?;
                let v = a.mul(&a)?.add_scalar(1.0)?.to_vec::<f32>()?;
                Ok(format!("{v:?}"))
            })();
            eprintln!("stderr after the engine started");
            report(result);
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn the_cpu_plugin_starts_with_cpu_device_count_and_runs() {
    let plugin = Plugin::from_env().expect("the CPU plugin loads (scripts/setup.sh installs it)");
    assert_eq!(plugin.kind(), PluginKind::Cpu);
    let one = Client::new(plugin, &ClientOptions::default().cpu_device_count(1)).unwrap();
    assert_eq!(one.devices().len(), 1, "cpu_device_count reached the CPU plugin");
    let program = "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n\
                   %0 = stablehlo.add %a, %a : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}";
    let exe = one.compile(program, &CompileOptions::default()).unwrap();
    let x = one.buffer_from_host(&[1f32, 2.5], &[2], 0).unwrap();
    assert_eq!(exe.execute(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
}

#[test]
fn the_users_create_options_reach_the_plugin_and_win() {
    let run = run_child("client", &[("XLAPROF_PJRT_CREATE_OPTIONS", "cpu_device_count=3")], None);
    assert_eq!(run.result(), "ok devices=3");
}

#[test]
fn a_malformed_create_option_is_an_error_not_a_panic() {
    let run = run_child("client", &[("XLAPROF_PJRT_CREATE_OPTIONS", "cpu_device_count=[1,")], None);
    let result = run.result();
    assert!(result.starts_with("err CreateOptions"), "{result}");
    assert!(result.contains("XLAPROF_PJRT_CREATE_OPTIONS: unclosed `[`"), "{result}");
}

#[test]
fn options_of_every_type_pass_to_the_plugin() {
    // The CPU plugin reads cpu_device_count and ignores names it does not know (the CUDA plugin
    // refuses them); each value still crosses the C API as its PJRT_NamedValue type.
    let options = "cpu_device_count=2, a_string=\"x\", a_list=[1,2], a_float=0.5, a_bool=true";
    let run = run_child("client", &[("XLAPROF_PJRT_CREATE_OPTIONS", options)], None);
    assert_eq!(run.result(), "ok devices=2");
}

#[test]
fn create_options_are_typed() {
    let parsed = parse_create_options(
        "memory_fraction=0.5,preallocate=false,visible_devices=[0,1],allocator=bfc,node_id=0",
    )
    .unwrap();
    let values: Vec<&OptionValue> = parsed.iter().map(|o| &o.value).collect();
    assert_eq!(
        values,
        [
            &OptionValue::Float(0.5),
            &OptionValue::Bool(false),
            &OptionValue::IntList(vec![0, 1]),
            &OptionValue::String("bfc".into()),
            &OptionValue::Int(0),
        ]
    );
    let err = parse_create_options("preallocate").unwrap_err();
    assert!(matches!(err, Error::CreateOptions { .. }));
    assert!(err.to_string().contains("`preallocate` has no `=`"), "{err}");
}

#[test]
fn options_for_the_cpu_plugin_are_not_sent_to_another() {
    let engine_options = ClientOptions::default().cpu_device_count(1).gpu_preallocate(false);
    assert!(engine_options.resolve(PluginKind::Other, &[]).is_empty());
    let names = |kind| -> Vec<String> {
        engine_options.resolve(kind, &[]).into_iter().map(|o| o.name).collect()
    };
    assert_eq!(names(PluginKind::Cpu), ["cpu_device_count"]);
    assert_eq!(names(PluginKind::Gpu), ["preallocate"]);
    for (path, kind) in [
        ("site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", PluginKind::Cpu),
        ("site-packages/xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so", PluginKind::Gpu),
        ("site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so", PluginKind::Gpu),
    ] {
        assert_eq!(PluginKind::from_file_name(Path::new(path)), kind, "{path}");
    }
}

/// A fresh folder for one test, removed when the test ends.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("xlaprof-plugins-{name}-")).tempdir().unwrap()
}

/// An empty file where an installed package would put its library: only the lookup is tested.
fn fake_install(site: &Path, library: &str) -> PathBuf {
    let path = site.join(library);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"").unwrap();
    path
}

#[test]
fn every_cuda_package_is_found_where_it_installs_its_plugin() {
    let packages: Vec<&str> = CUDA_PLUGINS.iter().map(|p| p.package).collect();
    assert_eq!(
        packages,
        ["xla-cuda13-pjrt", "xla-cuda12-pjrt", "jax-cuda13-pjrt", "jax-cuda12-pjrt"]
    );
    for package in CUDA_PLUGINS {
        let site = temp_dir(&format!("site-{}", package.package));
        let library = fake_install(site.path(), package.library);
        let found = locate::find_in_site(site.path(), CUDA_PLUGINS).unwrap();
        assert_eq!(found, (*package, library));
    }
    // The official package comes before JAX's in one environment.
    let site = temp_dir("site-both");
    let official = fake_install(site.path(), "xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so");
    fake_install(site.path(), "jax_plugins/xla_cuda13/xla_cuda_plugin.so");
    assert_eq!(locate::find_in_site(site.path(), CUDA_PLUGINS).unwrap().1, official);
}

#[test]
fn a_cuda_plugin_in_the_projects_venv_is_found() {
    let project = temp_dir("project");
    let site = project.path().join(".venv/lib/python3.12/site-packages");
    let library = fake_install(&site, "jax_plugins/xla_cuda12/xla_cuda_plugin.so");
    assert_eq!(DeviceKind::Cuda.find_plugin(&[project.path().join("src")]).unwrap(), library);
}

#[test]
fn without_a_cuda_plugin_the_error_says_what_was_looked_for_where_and_how_to_install() {
    let project = temp_dir("project-without");
    let site = project.path().join(".venv/lib/python3.12/site-packages");
    fake_install(&site, "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
    let err = match DeviceKind::Cuda.find_plugin(&[project.path().to_path_buf()]) {
        Err(err) => err,
        // The machine has a CUDA plugin in the active environment; the lookup is right to find it.
        Ok(found) => return eprintln!("skipped: a real CUDA plugin is installed at {found:?}"),
    };
    assert!(matches!(err, Error::DevicePluginNotFound { .. }), "{err:?}");
    let text = err.to_string();
    for package in CUDA_PLUGINS {
        assert!(text.contains(package.package), "{text}");
        assert!(text.contains(package.library), "{text}");
    }
    assert!(text.contains(&site.display().to_string()), "the site searched is named: {text}");
    assert!(text.contains("pip install xla-cuda12-pjrt"), "{text}");
    assert!(text.contains("XLAPROF_DEVICE=cuda"), "{text}");
    assert!(text.contains("XLAPROF_PJRT_PLUGIN"), "{text}");
}

#[test]
fn xlaprof_device_cuda_looks_for_a_cuda_plugin() {
    // Found in an active virtual environment: an empty file, so this only checks which path
    // would be loaded. The project's own .venv comes first; if it has a real CUDA plugin, fine.
    let venv = temp_dir("active-venv");
    let library = fake_install(
        &venv.path().join("lib/python3.11/site-packages"),
        "xla_plugins/xla_cuda13_pjrt/xla_gpu_pjrt.so",
    );
    let cwd = temp_dir("cwd");
    let venv_s = venv.path().display().to_string();
    let run = run_child(
        "locate",
        &[("XLAPROF_DEVICE", "cuda"), ("VIRTUAL_ENV", &venv_s)],
        Some(cwd.path()),
    );
    let result = run.result();
    let found = result.strip_prefix("ok ").unwrap_or_else(|| panic!("{result}"));
    assert!(
        found == library.display().to_string() || found.ends_with(".so") && !found.contains("cpu"),
        "{result}"
    );

    // XLAPROF_PJRT_PLUGIN stays first.
    let run = run_child(
        "locate",
        &[("XLAPROF_DEVICE", "cuda"), ("XLAPROF_PJRT_PLUGIN", "/opt/mine.so")],
        Some(cwd.path()),
    );
    assert_eq!(run.result(), "ok /opt/mine.so");
}

#[test]
fn an_unknown_device_is_a_clear_error() {
    assert_eq!(DeviceKind::parse(" CUDA ").unwrap(), DeviceKind::Cuda);
    assert_eq!(DeviceKind::parse("cpu").unwrap(), DeviceKind::Cpu);
    let run = run_child("locate", &[("XLAPROF_DEVICE", "tpu9")], None);
    let result = run.result();
    assert!(result.starts_with("err UnknownDevice"), "{result}");
    assert!(result.contains("XLAPROF_DEVICE=\"tpu9\" is not a device xlaprof knows"), "{result}");
    assert!(result.contains("`cpu`") && result.contains("`cuda`"), "{result}");
}

/// Lines the CPU plugin prints when it starts with `cpu_device_count`.
const PLUGIN_LINES: [&str; 2] =
    ["All log messages before absl::InitializeLog()", "cpu_device_count set via create_options"];

#[test]
fn the_plugins_log_lines_do_not_greet_the_user() {
    let run = run_child("engine", &[], None);
    assert_eq!(run.result(), "ok [2.0, 5.0, 10.0]");
    for line in PLUGIN_LINES {
        assert!(!run.stderr.contains(line), "{line:?} on stderr:\n{}", run.stderr);
    }
    assert!(
        run.stderr.contains("stderr after the engine started"),
        "stderr is back:\n{}",
        run.stderr
    );
}

#[test]
fn the_plugins_log_lines_show_with_xlaprof_debug() {
    let run = run_child("engine", &[("XLAPROF_DEBUG", "1")], None);
    assert_eq!(run.result(), "ok [2.0, 5.0, 10.0]");
    assert!(run.stderr.contains(PLUGIN_LINES[1]), "the plugin's line shows:\n{}", run.stderr);
    assert!(run.stderr.contains("stderr after the engine started"), "{}", run.stderr);
}
