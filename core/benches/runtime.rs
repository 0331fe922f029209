//! Runtime figures: plugin load and client creation, compile times, cached execute latency (our
//! wrapper against direct C calls), and host<->device bandwidth.
//!
//!     cargo bench -p xlaprof-core --bench runtime
//!
//! Prints medians over repetitions; absolute numbers move between runs on a shared machine, so
//! compare ratios measured in the same run.

use std::time::{Duration, Instant};

use xlaprof_core::runtime::ffi;
use xlaprof_core::runtime::{Client, ClientOptions, CompileOptions, Executable, Plugin};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed())
}

/// `x = x * 1.0001 + 0.5`, `ops / 2` times, on f32[64,64]: `ops` StableHLO ops.
fn chain_program(ops: usize) -> String {
    let ty = "tensor<64x64xf32>";
    let mut body = format!(
        "  %a = stablehlo.constant dense<1.0001> : {ty}\n  %b = stablehlo.constant dense<0.5> : {ty}\n"
    );
    let mut last = "%x".to_string();
    for i in 0..ops / 2 {
        body += &format!("  %m{i} = stablehlo.multiply {last}, %a : {ty}\n");
        body += &format!("  %s{i} = stablehlo.add %m{i}, %b : {ty}\n");
        last = format!("%s{i}");
    }
    format!("func.func @main(%x: {ty}) -> {ty} {{\n{body}  return {last} : {ty}\n}}\n")
}

const ONE_OP: &str = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n\
  %c = stablehlo.constant dense<1.0> : tensor<4xf32>\n\
  %0 = stablehlo.add %x, %c : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}";

/// One execute through the C API directly, as a baseline for the wrapper's overhead.
fn raw_execute(plugin: &Plugin, exe: &Executable, input: *mut ffi::PJRT_Buffer) {
    let api = plugin.api();
    let args_list: [*mut ffi::PJRT_Buffer; 1] = [input];
    let arg_ptr: *const *mut ffi::PJRT_Buffer = args_list.as_ptr();
    let mut out: [*mut ffi::PJRT_Buffer; 1] = [std::ptr::null_mut()];
    let out_ptr: *mut *mut ffi::PJRT_Buffer = out.as_mut_ptr();
    let mut done: *mut ffi::PJRT_Event = std::ptr::null_mut();
    let mut options = ffi::PJRT_ExecuteOptions {
        struct_size: std::mem::size_of::<ffi::PJRT_ExecuteOptions>(),
        ..Default::default()
    };
    let mut a = ffi::PJRT_LoadedExecutable_Execute_Args {
        struct_size: std::mem::size_of::<ffi::PJRT_LoadedExecutable_Execute_Args>(),
        executable: exe.as_raw(),
        options: &mut options,
        argument_lists: &arg_ptr,
        num_devices: 1,
        num_args: 1,
        output_lists: &out_ptr,
        device_complete_events: &mut done,
        ..Default::default()
    };
    // SAFETY: all pointers above are live for the calls; each returned handle is released once.
    unsafe {
        let err = (api.PJRT_LoadedExecutable_Execute.unwrap())(&mut a);
        assert!(err.is_null());
        let mut w = ffi::PJRT_Event_Await_Args {
            struct_size: std::mem::size_of::<ffi::PJRT_Event_Await_Args>(),
            event: done,
            ..Default::default()
        };
        (api.PJRT_Event_Await.unwrap())(&mut w);
        let mut d = ffi::PJRT_Event_Destroy_Args {
            struct_size: std::mem::size_of::<ffi::PJRT_Event_Destroy_Args>(),
            event: done,
            ..Default::default()
        };
        (api.PJRT_Event_Destroy.unwrap())(&mut d);
        let mut b = ffi::PJRT_Buffer_Destroy_Args {
            struct_size: std::mem::size_of::<ffi::PJRT_Buffer_Destroy_Args>(),
            buffer: out[0],
            ..Default::default()
        };
        (api.PJRT_Buffer_Destroy.unwrap())(&mut b);
    }
}

fn main() -> xlaprof_core::Result<()> {
    let (plugin, load) = time(Plugin::from_env);
    let plugin = plugin?;
    let (client, first_client) = time(|| Client::new(plugin, &ClientOptions::default()));
    let client = client?;
    let clients: Vec<Duration> = (0..5)
        .map(|_| time(|| Client::new(plugin, &ClientOptions::default().cpu_device_count(1))).1)
        .collect();
    println!("plugin            {}", plugin.path().display());
    println!("plugin load       {:>10.1} ms", load.as_secs_f64() * 1e3);
    println!("first client      {:>10.1} ms", first_client.as_secs_f64() * 1e3);
    println!("client create     {:>10.1} ms (median of 5)", median(clients).as_secs_f64() * 1e3);

    let opts = CompileOptions::default();
    let one: Vec<Duration> = (0..10).map(|_| time(|| client.compile(ONE_OP, &opts)).1).collect();
    println!("compile 1 op      {:>10.2} ms (median of 10)", median(one).as_secs_f64() * 1e3);
    let chain = chain_program(1000);
    let thousand: Vec<Duration> =
        (0..3).map(|_| time(|| client.compile(&chain, &opts)).1).collect();
    println!("compile 1000 ops  {:>10.2} ms (median of 3)", median(thousand).as_secs_f64() * 1e3);

    let exe = client.compile(ONE_OP, &opts)?;
    let x = client.buffer_from_host(&[1f32, 2.0, 3.0, 4.0], &[4], 0)?;
    let (reps, calls) = (15, 2000);
    let mut wrapper = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..200 {
        exe.execute(&[&x])?;
        raw_execute(plugin, &exe, x.as_raw());
    }
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..calls {
            raw_execute(plugin, &exe, x.as_raw());
        }
        raw.push(t.elapsed() / calls);
        let t = Instant::now();
        for _ in 0..calls {
            exe.execute(&[&x])?;
        }
        wrapper.push(t.elapsed() / calls);
    }
    let (w, r) = (median(wrapper), median(raw));
    println!(
        "execute 1 op      {:>10.2} µs wrapper, {:.2} µs raw C calls, overhead {:.2} µs",
        w.as_secs_f64() * 1e6,
        r.as_secs_f64() * 1e6,
        (w.as_secs_f64() - r.as_secs_f64()) * 1e6
    );

    // The bench's chain (`x * 1.0001 + 0.5`, 1,000 times, constants as JAX writes them) run by
    // the plugin directly: the floor for the engine's `chain_execute_us` on this plugin.
    let chain = client.compile(&chain_program(2000), &opts)?;
    let x64 = client.buffer_from_host(&vec![1f32; 64 * 64], &[64, 64], 0)?;
    for _ in 0..20 {
        chain.execute(&[&x64])?;
    }
    let runs: Vec<Duration> = (0..200).map(|_| time(|| chain.execute(&[&x64])).1).collect();
    println!(
        "execute chain     {:>10.1} µs (2,000 ops on f32[64,64], median of 200)",
        median(runs).as_secs_f64() * 1e6
    );

    let n = 16 << 20; // f32 elements in 64 MiB
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mb = (n * 4) as f64 / (1u64 << 20) as f64;
    let mut up = Vec::new();
    let mut down = Vec::new();
    for _ in 0..5 {
        let (buf, t) = time(|| client.buffer_from_host(&host, &[n as i64], 0));
        up.push(t);
        let buf = buf?;
        down.push(time(|| buf.to_vec::<f32>()).1);
    }
    println!("host->device 64MiB{:>10.2} GiB/s", mb / 1024.0 / median(up).as_secs_f64());
    println!("device->host 64MiB{:>10.2} GiB/s", mb / 1024.0 / median(down).as_secs_f64());
    Ok(())
}
