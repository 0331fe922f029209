//! The PJRT runtime against the real XLA CPU plugin: every supported dtype, odd shapes, donation,
//! large buffers, the plugin's extras, and the errors a user can cause.

use std::sync::OnceLock;

use half::{bf16, f16};
use xlaprof_core::runtime::{Client, ClientOptions, CompileOptions, Plugin};
use xlaprof_core::{DType, Error, NativeType};

fn client() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        Client::from_env().expect("the CPU plugin loads (scripts/setup.sh installs it)")
    })
}

fn compile(mlir: &str) -> xlaprof_core::runtime::Executable {
    client().compile(mlir, &CompileOptions::default()).expect("program compiles")
}

/// `main(a, b) = a <op> b` over `tensor<{shape}x{ty}>`.
fn binary_program(op: &str, ty: &str) -> String {
    format!(
        "func.func @main(%a: tensor<{ty}>, %b: tensor<{ty}>) -> tensor<{ty}> {{\n\
         %0 = stablehlo.{op} %a, %b : tensor<{ty}>\n  return %0 : tensor<{ty}>\n}}"
    )
}

fn run_binary<T: NativeType>(op: &str, ty: &str, dims: &[i64], a: &[T], b: &[T]) -> Vec<T> {
    let exe = compile(&binary_program(op, ty));
    let c = client();
    let x = c.buffer_from_host(a, dims, 0).unwrap();
    let y = c.buffer_from_host(b, dims, 0).unwrap();
    let out = exe.execute(&[&x, &y]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].dims(), dims);
    assert_eq!(out[0].dtype(), T::DTYPE);
    out[0].to_vec::<T>().unwrap()
}

#[test]
fn client_reports_platform_and_four_default_cpu_devices() {
    let c = client();
    assert_eq!(c.platform_name(), "cpu");
    assert!(!c.platform_version().is_empty());
    assert_eq!(c.devices().len(), 4, "the CPU plugin makes 4 devices without options");
    let ids: Vec<i64> = c.devices().iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    let (major, minor) = c.plugin().api_version();
    assert_eq!((major, minor), (0, 81));
}

#[test]
fn floats_of_every_width_add_like_rust() {
    let a: Vec<f32> = (0..6).map(|i| i as f32 * 1.5 - 2.0).collect();
    let b: Vec<f32> = (0..6).map(|i| 0.25 * i as f32).collect();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(run_binary("add", "2x3xf32", &[2, 3], &a, &b), want);

    let a64: Vec<f64> = a.iter().map(|&x| x as f64 / 3.0).collect();
    let b64: Vec<f64> = b.iter().map(|&x| x as f64 * 7.0).collect();
    let want64: Vec<f64> = a64.iter().zip(&b64).map(|(x, y)| x * y).collect();
    assert_eq!(run_binary("multiply", "6xf64", &[6], &a64, &b64), want64);

    let ah: Vec<f16> = a.iter().map(|&x| f16::from_f32(x)).collect();
    let bh: Vec<f16> = b.iter().map(|&x| f16::from_f32(x)).collect();
    let wanth: Vec<f16> =
        ah.iter().zip(&bh).map(|(x, y)| f16::from_f32(x.to_f32() - y.to_f32())).collect();
    assert_eq!(run_binary("subtract", "3x2xf16", &[3, 2], &ah, &bh), wanth);

    let ab: Vec<bf16> = a.iter().map(|&x| bf16::from_f32(x)).collect();
    let bb: Vec<bf16> = b.iter().map(|&x| bf16::from_f32(x)).collect();
    let wantb: Vec<bf16> =
        ab.iter().zip(&bb).map(|(x, y)| bf16::from_f32(x.to_f32() + y.to_f32())).collect();
    assert_eq!(run_binary("add", "6xbf16", &[6], &ab, &bb), wantb);
}

#[test]
fn integers_wrap_like_rust() {
    let a: Vec<i8> = vec![100, -100, 5, 127];
    let b: Vec<i8> = vec![100, -100, -7, 1];
    let want: Vec<i8> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
    assert_eq!(run_binary("add", "4xi8", &[4], &a, &b), want);

    let a: Vec<i32> = vec![i32::MAX, 3, -9, 1 << 20];
    let b: Vec<i32> = vec![1, -5, 4, 3];
    let want: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_mul(*y)).collect();
    assert_eq!(run_binary("multiply", "4xi32", &[4], &a, &b), want);

    let a: Vec<i64> = vec![i64::MIN + 5, 1 << 40, 42, -1];
    let b: Vec<i64> = vec![3, 1 << 41, 43, -1];
    let want: Vec<i64> = a.iter().zip(&b).map(|(x, y)| x.wrapping_sub(*y)).collect();
    assert_eq!(run_binary("subtract", "2x2xi64", &[2, 2], &a, &b), want);

    let a: Vec<u8> = vec![200, 100, 0, 255];
    let b: Vec<u8> = vec![100, 100, 0, 1];
    let want: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
    assert_eq!(run_binary("add", "4xui8", &[4], &a, &b), want);
}

#[test]
fn predicates_combine_like_rust() {
    let a = vec![true, true, false, false];
    let b = vec![true, false, true, false];
    let and: Vec<bool> = a.iter().zip(&b).map(|(x, y)| *x && *y).collect();
    let or: Vec<bool> = a.iter().zip(&b).map(|(x, y)| *x || *y).collect();
    assert_eq!(run_binary("and", "4xi1", &[4], &a, &b), and);
    assert_eq!(run_binary("or", "4xi1", &[4], &a, &b), or);
}

#[test]
fn scalars_round_trip() {
    assert_eq!(run_binary("add", "f32", &[], &[1.25f32], &[2.5]), vec![3.75]);
    assert_eq!(run_binary("maximum", "i64", &[], &[-3i64], &[-8]), vec![-3]);
}

#[test]
fn zero_size_arrays_compile_and_run() {
    let out = run_binary::<f32>("add", "0x3xf32", &[0, 3], &[], &[]);
    assert!(out.is_empty());
}

#[test]
fn several_outputs_come_back_in_order() {
    let exe = compile(
        "func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xi1>) {\n\
           %s = stablehlo.add %a, %b : tensor<3xf32>\n\
           %d = stablehlo.subtract %a, %b : tensor<3xf32>\n\
           %c = stablehlo.compare GT, %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>\n\
           return %s, %d, %c : tensor<3xf32>, tensor<3xf32>, tensor<3xi1>\n}",
    );
    let c = client();
    let a = c.buffer_from_host(&[1.0f32, 5.0, -2.0], &[3], 0).unwrap();
    let b = c.buffer_from_host(&[2.0f32, 1.0, -2.0], &[3], 0).unwrap();
    let out = exe.execute(&[&a, &b]).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 6.0, -4.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![-1.0, 4.0, 0.0]);
    assert_eq!(out[2].to_vec::<bool>().unwrap(), vec![false, true, false]);
}

#[test]
fn a_64_mib_buffer_goes_through_a_program_and_back() {
    let n = 16 * 1024 * 1024; // 16 Mi f32 = 64 MiB
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let exe = compile(
        "func.func @main(%a: tensor<16777216xf32>) -> tensor<16777216xf32> {\n\
           %0 = stablehlo.add %a, %a : tensor<16777216xf32>\n  return %0 : tensor<16777216xf32>\n}",
    );
    let buf = client().buffer_from_host(&host, &[n as i64], 0).unwrap();
    assert_eq!(buf.size_bytes(), 64 << 20);
    let out = exe.execute(&[&buf]).unwrap().remove(0).to_vec::<f32>().unwrap();
    assert!(out.iter().zip(&host).all(|(o, h)| *o == h * 2.0));
}

#[test]
fn donated_inputs_are_consumed_and_outputs_are_right() {
    let exe = compile(
        "func.func @main(%w: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %g: tensor<4xf32>) -> tensor<4xf32> {\n\
           %0 = stablehlo.subtract %w, %g : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}",
    );
    assert_eq!(exe.signature().unwrap().donated, vec![0]);
    let c = client();
    let w = c.buffer_from_host(&[1.0f32, 2.0, 3.0, 4.0], &[4], 0).unwrap();
    let g = c.buffer_from_host(&[0.5f32; 4], &[4], 0).unwrap();
    let out = exe.execute(&[&w, &g]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.5, 1.5, 2.5, 3.5]);
    assert!(w.is_deleted(), "the donated buffer now belongs to the output");
    assert!(matches!(w.to_vec::<f32>(), Err(Error::BufferDeleted)));
    assert!(!g.is_deleted());
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.5; 4]);
}

#[test]
fn invalid_mlir_is_an_error_with_xlas_diagnostic() {
    let err = client()
        .compile(
            "func.func @main() -> tensor<f32> { %0 = stablehlo.bogus : tensor<f32> }",
            &CompileOptions::default(),
        )
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Pjrt { .. }), "{text}");
    assert!(text.contains("PJRT_Client_Compile"), "{text}");
    assert!(text.contains("bogus"), "XLA's diagnostic names the bad op: {text}");
}

#[test]
fn wrong_inputs_are_errors_naming_expected_and_given() {
    let exe = compile(&binary_program("add", "2x3xf32"));
    let c = client();
    let a = c.buffer_from_host(&[0f32; 6], &[2, 3], 0).unwrap();
    let err = exe.execute(&[&a]).unwrap_err();
    assert_eq!(err.to_string(), "the executable takes 2 inputs, but 1 were given");
    let t = c.buffer_from_host(&[0f32; 6], &[3, 2], 0).unwrap();
    let err = exe.execute(&[&a, &t]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "input 1 of the executable must be f32[2,3], but f32[3,2] was given"
    );
    let i = c.buffer_from_host(&[0i32; 6], &[2, 3], 0).unwrap();
    let err = exe.execute(&[&i, &a]).unwrap_err();
    assert!(err.to_string().contains("must be f32[2,3], but s32[2,3] was given"), "{err}");
}

#[test]
fn plugins_own_count_check_is_an_error_too() {
    // Without a signature (a deserialized executable) PJRT's own check must still be an error.
    let exe = compile(&binary_program("add", "2xf32"));
    let bytes = exe.serialize().unwrap();
    let blind = client().deserialize(&bytes, None).unwrap();
    let a = client().buffer_from_host(&[1f32, 2.0], &[2], 0).unwrap();
    let err = blind.execute(&[&a]).unwrap_err();
    assert!(matches!(err, Error::Pjrt { .. }), "{err}");
}

#[test]
fn host_data_that_does_not_fill_the_shape_is_an_error() {
    let err = client().buffer_from_host(&[1f32, 2.0, 3.0], &[2, 2], 0).unwrap_err();
    assert_eq!(err.to_string(), "host data has 3 elements, but shape [2, 2] needs 4");
    let err = client().buffer_from_host(&[1f32], &[1], 9).unwrap_err();
    assert!(matches!(err, Error::NoSuchDevice { index: 9, count: 4 }));
    let buf = client().buffer_from_host(&[1f32], &[1], 0).unwrap();
    assert!(matches!(buf.to_vec::<i32>(), Err(Error::DTypeMismatch { .. })));
}

#[test]
fn bad_plugin_paths_are_clear_errors() {
    let err = Plugin::load(std::path::Path::new("/nonexistent/xla_plugin.so")).unwrap_err();
    assert!(matches!(err, Error::PluginLoad { .. }));
    assert!(err.to_string().contains("/nonexistent/xla_plugin.so"), "{err}");

    let dir = tempfile::Builder::new().prefix("xlaprof-notaplugin-").tempdir().unwrap();
    let text = dir.path().join("text.so");
    std::fs::write(&text, "not a shared library").unwrap();
    let err = Plugin::load(&text).unwrap_err();
    assert!(matches!(err, Error::PluginLoad { .. }), "{err}");

    // A real shared library that is not a PJRT plugin: the C library itself.
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
    ]
    .into_iter()
    .map(std::path::Path::new)
    .find(|p| p.exists())
    .expect("a libc to load");
    let err = Plugin::load(libc).unwrap_err();
    assert!(matches!(err, Error::NotAPjrtPlugin { .. }), "{err}");
    assert!(err.to_string().contains("does not export GetPjrtApi"));
}

#[test]
fn two_clients_live_side_by_side_and_one_has_two_devices() {
    let plugin = Plugin::from_env().unwrap();
    let two = Client::new(plugin, &ClientOptions::default().cpu_device_count(2)).unwrap();
    assert_eq!(two.devices().len(), 2);
    let program = binary_program("add", "2xf32");
    // Compiled for device 1 and fed buffers on device 1.
    let exe = two.compile(&program, &CompileOptions { device: 1, ..Default::default() }).unwrap();
    let a = two.buffer_from_host(&[1f32, 2.0], &[2], 1).unwrap();
    let out = exe.execute(&[&a, &a]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    // The shared client works at the same time.
    let b = client().buffer_from_host(&[3f32, 4.0], &[2], 0).unwrap();
    assert_eq!(
        compile(&program).execute(&[&b, &b]).unwrap()[0].to_vec::<f32>().unwrap(),
        vec![6.0, 8.0]
    );
}

#[test]
fn serialized_executables_load_and_run() {
    let program = binary_program("multiply", "3xf64");
    let exe = compile(&program);
    let bytes = exe.serialize().unwrap();
    assert!(!bytes.is_empty());
    let loaded = client().deserialize(&bytes, exe.signature().cloned()).unwrap();
    let a = client().buffer_from_host(&[1.5f64, -2.0, 4.0], &[3], 0).unwrap();
    assert_eq!(
        loaded.execute(&[&a, &a]).unwrap()[0].to_vec::<f64>().unwrap(),
        vec![2.25, 4.0, 16.0]
    );
}

#[test]
fn memory_stats_cost_analysis_and_optimized_program_are_reported() {
    let exe = compile(
        "func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {\n\
           %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n\
           return %0 : tensor<64x64xf32>\n}",
    );
    let stats = exe.memory_stats().unwrap();
    assert_eq!(stats.argument_bytes, 2 * 64 * 64 * 4);
    assert_eq!(stats.output_bytes, 64 * 64 * 4);
    let cost = exe.cost_analysis().unwrap();
    let flops = cost.flops().expect("flops reported");
    assert!((flops - 2.0 * 64.0 * 64.0 * 64.0).abs() / flops < 0.01, "flops {flops}");
    let (format, code) = exe.optimized_program().unwrap();
    assert!(!format.is_empty());
    assert!(!code.is_empty());
}

#[test]
fn optimized_hlo_text_comes_from_xla_itself() {
    let program = binary_program("add", "8xf32")
        .replace("return %0", "%1 = stablehlo.multiply %0, %a : tensor<8xf32>\n  return %1");
    let (exe, hlo) =
        client().compile_with_optimized_hlo(&program, &CompileOptions::default()).unwrap();
    assert!(hlo.contains("HloModule"), "{hlo}");
    assert!(hlo.contains("ENTRY"), "{hlo}");
    assert!(hlo.contains("fusion"), "XLA fused the add and the multiply: {hlo}");
    let a = client().buffer_from_host(&[2f32; 8], &[8], 0).unwrap();
    assert_eq!(exe.execute(&[&a, &a]).unwrap()[0].to_vec::<f32>().unwrap(), vec![8.0; 8]);
}

#[test]
fn every_dtype_round_trips_through_a_buffer() {
    let c = client();
    for dtype in DType::ALL {
        let bytes: Vec<u8> = (0..4 * dtype.size_bytes())
            .map(|i| if dtype == DType::Pred { (i % 2) as u8 } else { i as u8 })
            .collect();
        let buf = c.buffer_from_bytes(&bytes, dtype, &[2, 2], 0).unwrap();
        assert_eq!(buf.dtype(), dtype);
        assert_eq!(buf.to_bytes().unwrap(), bytes, "{dtype}");
    }
}
