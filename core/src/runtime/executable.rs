//! Compiling StableHLO with XLA and executing the result.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::buffer::Buffer;
use super::client::{Client, ClientHandle};
use super::ffi::{self, args, call};
use super::plugin::Plugin;
use super::proto::{self, Override};
use super::signature::Signature;
use crate::dtype::shape_string;
use crate::error::Result;
use crate::Error;

/// How to compile a program.
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// The device (index into `Client::devices`) the executable will run on.
    pub device: usize,
    /// For a program partitioned over several devices (SPMD): the devices of partition 0, 1, ...
    /// (indices into `Client::devices`); `device` is then unused.
    pub partitions: Vec<usize>,
    /// XLA `DebugOptions` fields by name (e.g. `xla_cpu_enable_fast_math`), applied to this compile.
    pub debug_options: Vec<(String, Override)>,
}

/// XLA's memory plan for a compiled program, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStats {
    pub generated_code_bytes: i64,
    pub argument_bytes: i64,
    pub output_bytes: i64,
    pub alias_bytes: i64,
    pub temp_bytes: i64,
    pub peak_memory_bytes: i64,
}

/// XLA's cost analysis of a compiled program: named properties such as `flops`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CostAnalysis {
    pub properties: BTreeMap<String, f64>,
}

impl CostAnalysis {
    pub fn flops(&self) -> Option<f64> {
        self.properties.get("flops").copied()
    }
    pub fn bytes_accessed(&self) -> Option<f64> {
        self.properties.get("bytes accessed").copied()
    }
    pub fn transcendentals(&self) -> Option<f64> {
        self.properties.get("transcendentals").copied()
    }
}

/// A partitioned program started on all its devices ([`Executable::launch_partitioned`]).
pub struct LaunchedPartitioned {
    /// `outputs[partition][output]`.
    pub outputs: Vec<Vec<Buffer>>,
    /// Each partition's end on its device, in partition order.
    pub done: Vec<Pending>,
}

/// A program started on its device ([`Executable::launch`]).
pub struct Launched {
    pub outputs: Vec<Buffer>,
    pub done: Pending,
}

/// The end of a launched execution on its device. Dropping it leaves the execution running,
/// unwatched; its outputs still wait for it when read.
pub struct Pending {
    plugin: &'static Plugin,
    event: *mut ffi::PJRT_Event,
    /// Set once the `on_done` callback has run: the event can be ready before it has.
    watched: Option<Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>>,
}

// SAFETY: a PJRT event may be awaited, queried and destroyed from any thread; this is its owner.
unsafe impl Send for Pending {}

impl Pending {
    /// Whether the device has finished (an error asking counts as finished: `wait` reports it).
    pub fn is_done(&self) -> bool {
        self.plugin.event_ready(self.event)
    }

    /// Waits until the device has finished, and the `on_done` callback has run; the execution's
    /// error if it failed there.
    pub fn wait(mut self) -> Result<()> {
        let event = std::mem::replace(&mut self.event, std::ptr::null_mut());
        let status = self.plugin.await_event(event);
        if let Some(watched) = &self.watched {
            let mut ran = watched.0.lock().unwrap_or_else(|p| p.into_inner());
            while !*ran {
                ran = watched.1.wait(ran).unwrap_or_else(|p| p.into_inner());
            }
        }
        status
    }

    /// Waits for every one of `done` (each device's end of one execution): the first error.
    pub fn wait_all(done: Vec<Pending>) -> Result<()> {
        done.into_iter().fold(Ok(()), |status, pending| status.and(pending.wait()))
    }

    /// Calls `then` once the device has finished, with when (`events::now_ns` time) and how, on
    /// the thread that sees it finish (at once, on this one, if it has). Once per execution.
    pub fn on_done(&mut self, then: impl FnOnce(u64, Result<()>) + Send + 'static) -> Result<()> {
        if self.watched.is_some() {
            return Err(Error::Unsupported("an execution's end is watched once".to_string()));
        }
        if self.event.is_null() {
            then(crate::events::now_ns(), Ok(()));
            return Ok(());
        }
        let watched = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let ran = watched.clone();
        let then = move |at, status| {
            then(at, status);
            *ran.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            ran.1.notify_all();
        };
        self.plugin.on_event(self.event, Box::new(then))?;
        self.watched = Some(watched);
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.event.is_null() {
            let mut d = args!(PJRT_Event_Destroy_Args { event: self.event });
            let _ = call!(self.plugin, PJRT_Event_Destroy, &mut d);
        }
    }
}

/// A compiled program loaded on one device. Dropping it releases the PJRT handles exactly once.
pub struct Executable {
    client: Arc<ClientHandle>,
    loaded: *mut ffi::PJRT_LoadedExecutable,
    executable: *mut ffi::PJRT_Executable,
    num_outputs: usize,
    signature: Option<Signature>,
    /// How many devices one execution runs on (the partitions of an SPMD program).
    partitions: usize,
}

// SAFETY: PJRT executables are thread-safe; the handles are only destroyed in Drop.
unsafe impl Send for Executable {}
// SAFETY: as above.
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        let plugin = self.client.plugin;
        let mut e = args!(PJRT_Executable_Destroy_Args { executable: self.executable });
        let _ = call!(plugin, PJRT_Executable_Destroy, &mut e);
        let mut l = args!(PJRT_LoadedExecutable_Destroy_Args { executable: self.loaded });
        let _ = call!(plugin, PJRT_LoadedExecutable_Destroy, &mut l);
    }
}

impl Client {
    /// Compiles a StableHLO program (MLIR text) for one device.
    pub fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Executable> {
        let device_ids = match options.partitions.as_slice() {
            [] => vec![self.device(options.device)?.id],
            devices => devices.iter().map(|&d| Ok(self.device(d)?.id)).collect::<Result<_>>()?,
        };
        let compile_options = proto::compile_options(&device_ids, &options.debug_options);
        let format = "mlir";
        let program = args!(PJRT_Program {
            code: mlir.as_ptr() as *mut _,
            code_size: mlir.len(),
            format: format.as_ptr() as *const _,
            format_size: format.len(),
        });
        let mut a = args!(PJRT_Client_Compile_Args {
            client: self.handle.raw,
            program: &program,
            compile_options: compile_options.as_ptr() as *const _,
            compile_options_size: compile_options.len(),
        });
        call!(self.handle.plugin, PJRT_Client_Compile, &mut a)?;
        // A partitioned program's buffers are shards: the signature's whole shapes do not type them.
        let signature = if device_ids.len() > 1 { None } else { Signature::parse(mlir) };
        let mut exe = Executable::wrap(self.handle.clone(), a.executable, signature)?;
        exe.partitions = device_ids.len();
        Ok(exe)
    }

    /// Compiles like [`Client::compile`] and also returns XLA's optimized HLO as text, for
    /// debugging views. XLA writes it through its own dump option into a private temporary folder,
    /// which is removed afterwards.
    pub fn compile_with_optimized_hlo(
        &self,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<(Executable, String)> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "xlaprof-hlo-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = options.clone();
        options.debug_options.extend([
            ("xla_dump_to".to_string(), Override::Str(dir.to_string_lossy().into_owned())),
            ("xla_dump_hlo_as_text".to_string(), Override::Bool(true)),
        ]);
        let compiled = self.compile(mlir, &options);
        let text = read_optimized_hlo(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let exe = compiled?;
        let text = text.ok_or_else(|| {
            Error::Unsupported("the plugin wrote no optimized HLO dump".to_string())
        })?;
        Ok((exe, text))
    }

    /// Loads an executable written by [`Executable::serialize`] by the same plugin version.
    /// `signature` is the program's (it is not part of XLA's serialized form).
    pub fn deserialize(&self, bytes: &[u8], signature: Option<Signature>) -> Result<Executable> {
        let mut a = args!(PJRT_Executable_DeserializeAndLoad_Args {
            client: self.handle.raw,
            serialized_executable: bytes.as_ptr() as *const _,
            serialized_executable_size: bytes.len(),
        });
        call!(self.handle.plugin, PJRT_Executable_DeserializeAndLoad, &mut a)?;
        Executable::wrap(self.handle.clone(), a.loaded_executable, signature)
    }
}

impl Executable {
    fn wrap(
        client: Arc<ClientHandle>,
        loaded: *mut ffi::PJRT_LoadedExecutable,
        signature: Option<Signature>,
    ) -> Result<Executable> {
        let plugin = client.plugin;
        let mut g = args!(PJRT_LoadedExecutable_GetExecutable_Args { loaded_executable: loaded });
        let got = call!(plugin, PJRT_LoadedExecutable_GetExecutable, &mut g);
        let mut exe = Executable {
            client,
            loaded,
            executable: g.executable,
            num_outputs: 0,
            signature,
            partitions: 1,
        };
        got?;
        let mut n = args!(PJRT_Executable_NumOutputs_Args { executable: exe.executable });
        call!(plugin, PJRT_Executable_NumOutputs, &mut n)?;
        exe.num_outputs = n.num_outputs;
        // A signature that disagrees with XLA's output count is not trusted for typing outputs.
        if exe.signature.as_ref().is_some_and(|s| s.outputs.len() != exe.num_outputs) {
            exe.signature = None;
        }
        Ok(exe)
    }

    /// The raw loaded executable, for benchmarks that compare against direct C calls.
    #[doc(hidden)]
    pub fn as_raw(&self) -> *mut ffi::PJRT_LoadedExecutable {
        self.loaded
    }

    fn plugin(&self) -> &'static Plugin {
        self.client.plugin
    }

    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The entry function's types, when the program was StableHLO with static shapes.
    pub fn signature(&self) -> Option<&Signature> {
        self.signature.as_ref()
    }

    /// Runs the program and waits for it to finish. Inputs the program donates
    /// (`tf.aliasing_output`) are consumed: afterwards they read as [`Error::BufferDeleted`].
    pub fn execute(&self, inputs: &[&Buffer]) -> Result<Vec<Buffer>> {
        let Launched { outputs, done } = self.launch(inputs)?;
        done.wait()?;
        Ok(outputs)
    }

    /// Starts the program and returns once the plugin has it: its outputs, which later programs
    /// may take as inputs at once (the device orders them) and which a read waits for, and the
    /// execution's end on the device, to wait for or watch.
    pub fn launch(&self, inputs: &[&Buffer]) -> Result<Launched> {
        self.launch_keeping(inputs, &[])
    }

    /// [`launch`](Self::launch), with the inputs at positions `kept` not donated even where the
    /// program donates them (`tf.aliasing_output`): XLA copies them, and they stay readable.
    pub fn launch_keeping(&self, inputs: &[&Buffer], kept: &[usize]) -> Result<Launched> {
        self.check_inputs(inputs)?;
        let kept: Vec<i64> = kept.iter().map(|&k| k as i64).collect();
        let args: Vec<*mut ffi::PJRT_Buffer> = inputs.iter().map(|b| b.raw).collect();
        let arg_list: *const *mut ffi::PJRT_Buffer = args.as_ptr();
        let mut outputs: Vec<*mut ffi::PJRT_Buffer> = vec![std::ptr::null_mut(); self.num_outputs];
        let output_list: *mut *mut ffi::PJRT_Buffer = outputs.as_mut_ptr();
        let mut done: *mut ffi::PJRT_Event = std::ptr::null_mut();
        let mut options = args!(PJRT_ExecuteOptions {
            non_donatable_input_indices: if kept.is_empty() {
                std::ptr::null()
            } else {
                kept.as_ptr()
            },
            num_non_donatable_input_indices: kept.len(),
        });
        let mut a = args!(PJRT_LoadedExecutable_Execute_Args {
            executable: self.loaded,
            options: &mut options,
            argument_lists: &arg_list,
            num_devices: 1,
            num_args: args.len(),
            output_lists: &output_list,
            device_complete_events: &mut done,
        });
        let plugin = self.plugin();
        let launched = call!(plugin, PJRT_LoadedExecutable_Execute, &mut a);
        // Own every output PJRT handed back before looking at errors, so none leaks.
        let outputs: Vec<Buffer> = match &self.signature {
            Some(sig) => outputs
                .iter()
                .zip(&sig.outputs)
                .filter(|(raw, _)| !raw.is_null())
                .map(|(&raw, ty)| {
                    Buffer::from_raw_typed(self.client.clone(), raw, ty.dtype, ty.dims.clone())
                })
                .collect(),
            None => outputs
                .iter()
                .filter(|raw| !raw.is_null())
                .map(|&raw| Buffer::from_raw(self.client.clone(), raw))
                .collect::<Result<_>>()?,
        };
        let done = Pending { plugin, event: done, watched: None };
        if let Err(e) = launched {
            // A failed launch may still hand back an event; it is released all the same.
            let _ = done.wait();
            return Err(e);
        }
        if outputs.len() != self.num_outputs {
            return Err(Error::Unsupported(format!(
                "execution returned {} of {} outputs",
                outputs.len(),
                self.num_outputs
            )));
        }
        Ok(Launched { outputs, done })
    }

    /// Starts a partitioned program on all its devices at once: `inputs[p]` are partition `p`'s
    /// arguments (its shards), and so are the outputs. One call for all devices, as XLA's
    /// collectives need every partition in one launch; each launch gets a new id, on which the
    /// collectives meet. Partitioned programs donate nothing. Returns once the plugin has it,
    /// as [`launch`](Self::launch) does: each device's end is in `done`.
    pub fn launch_partitioned(&self, inputs: &[Vec<&Buffer>]) -> Result<LaunchedPartitioned> {
        static LAUNCH: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);
        let misuse = |message: String| Err(Error::Sharding { message, location: None });
        if inputs.len() != self.partitions {
            return misuse(format!(
                "the program runs on {} devices, but {} argument lists were given",
                self.partitions,
                inputs.len()
            ));
        }
        let args: Vec<Vec<*mut ffi::PJRT_Buffer>> =
            inputs.iter().map(|list| list.iter().map(|b| b.raw).collect()).collect();
        let num_args = args.first().map_or(0, |a| a.len());
        if let Some(p) = args.iter().position(|a| a.len() != num_args) {
            return misuse(format!(
                "partition {p} was given {} arguments, partition 0 {num_args}",
                args[p].len()
            ));
        }
        let arg_lists: Vec<*const *mut ffi::PJRT_Buffer> =
            args.iter().map(|a| a.as_ptr()).collect();
        let mut outputs: Vec<Vec<*mut ffi::PJRT_Buffer>> =
            vec![vec![std::ptr::null_mut(); self.num_outputs]; self.partitions];
        let output_lists: Vec<*mut *mut ffi::PJRT_Buffer> =
            outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let mut done: Vec<*mut ffi::PJRT_Event> = vec![std::ptr::null_mut(); self.partitions];
        let mut options =
            args!(PJRT_ExecuteOptions { launch_id: LAUNCH.fetch_add(1, Ordering::Relaxed) });
        let mut a = args!(PJRT_LoadedExecutable_Execute_Args {
            executable: self.loaded,
            options: &mut options,
            argument_lists: arg_lists.as_ptr(),
            num_devices: self.partitions,
            num_args: num_args,
            output_lists: output_lists.as_ptr(),
            device_complete_events: done.as_mut_ptr(),
        });
        let plugin = self.plugin();
        let launched = call!(plugin, PJRT_LoadedExecutable_Execute, &mut a);
        // Own every output and event before looking at errors, so none leaks.
        let mut owned: Vec<Vec<Buffer>> = Vec::with_capacity(self.partitions);
        let mut typing: Result<()> = Ok(());
        for list in &outputs {
            let mut part = Vec::with_capacity(list.len());
            for &raw in list.iter().filter(|raw| !raw.is_null()) {
                match Buffer::from_raw(self.client.clone(), raw) {
                    Ok(b) => part.push(b),
                    Err(e) => typing = Err(e),
                }
            }
            owned.push(part);
        }
        let done: Vec<Pending> =
            done.into_iter().map(|event| Pending { plugin, event, watched: None }).collect();
        let failed = launched.and(typing).and_then(|()| {
            if owned.iter().any(|o| o.len() != self.num_outputs) {
                return Err(Error::Unsupported(format!(
                    "a partitioned execution returned fewer than {} outputs",
                    self.num_outputs
                )));
            }
            Ok(())
        });
        if let Err(e) = failed {
            // Whatever did start is waited for before its outputs go.
            let _ = Pending::wait_all(done);
            return Err(e);
        }
        Ok(LaunchedPartitioned { outputs: owned, done })
    }

    fn check_inputs(&self, inputs: &[&Buffer]) -> Result<()> {
        let Some(sig) = &self.signature else {
            return Ok(());
        };
        if inputs.len() != sig.inputs.len() {
            return Err(Error::InputCount { expected: sig.inputs.len(), given: inputs.len() });
        }
        for (index, (buffer, ty)) in inputs.iter().zip(&sig.inputs).enumerate() {
            if buffer.dtype() != ty.dtype || buffer.dims() != ty.dims.as_slice() {
                return Err(Error::InputMismatch {
                    index,
                    expected: ty.to_string(),
                    given: shape_string(buffer.dtype(), buffer.dims()),
                });
            }
        }
        Ok(())
    }

    /// XLA's memory plan for this executable, when the plugin reports one.
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        let mut a =
            args!(PJRT_Executable_GetCompiledMemoryStats_Args { executable: self.executable });
        call!(self.plugin(), PJRT_Executable_GetCompiledMemoryStats, &mut a)?;
        Ok(MemoryStats {
            generated_code_bytes: a.generated_code_size_in_bytes,
            argument_bytes: a.argument_size_in_bytes,
            output_bytes: a.output_size_in_bytes,
            alias_bytes: a.alias_size_in_bytes,
            temp_bytes: a.temp_size_in_bytes,
            peak_memory_bytes: a.peak_memory_in_bytes,
        })
    }

    /// XLA's cost analysis (flops, bytes accessed, ...), when the plugin provides it.
    pub fn cost_analysis(&self) -> Result<CostAnalysis> {
        let mut a = args!(PJRT_Executable_GetCostAnalysis_Args { executable: self.executable });
        call!(self.plugin(), PJRT_Executable_GetCostAnalysis, &mut a)?;
        let props: &[ffi::PJRT_NamedValue] = if a.properties.is_null() {
            &[]
        } else {
            // SAFETY: PJRT returns `num_properties` values owned by the executable.
            unsafe { std::slice::from_raw_parts(a.properties, a.num_properties) }
        };
        let mut properties = BTreeMap::new();
        for p in props {
            let name = Plugin::string(p.name, p.name_size);
            // SAFETY: the union member read is the one `type_` names.
            let value = unsafe {
                match p.type_ {
                    ffi::PJRT_NamedValue_kFloat => p.__bindgen_anon_1.float_value as f64,
                    ffi::PJRT_NamedValue_kInt64 => p.__bindgen_anon_1.int64_value as f64,
                    ffi::PJRT_NamedValue_kBool => p.__bindgen_anon_1.bool_value as u8 as f64,
                    _ => continue,
                }
            };
            properties.insert(name, value);
        }
        Ok(CostAnalysis { properties })
    }

    /// XLA's serialized form of this executable, for a persistent compile cache.
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let mut a = args!(PJRT_Executable_Serialize_Args { executable: self.executable });
        call!(self.plugin(), PJRT_Executable_Serialize, &mut a)?;
        let bytes = if a.serialized_bytes.is_null() {
            Vec::new()
        } else {
            // SAFETY: `serialized_bytes_size` bytes stay valid until the deleter runs below.
            unsafe {
                std::slice::from_raw_parts(a.serialized_bytes as *const u8, a.serialized_bytes_size)
            }
            .to_vec()
        };
        if let Some(deleter) = a.serialized_executable_deleter {
            // SAFETY: frees the plugin's serialized copy exactly once, after the copy above.
            unsafe { deleter(a.serialized_executable) };
        }
        Ok(bytes)
    }

    /// The program XLA produced after optimization, as the plugin exports it
    /// (`(format, bytes)`; the CPU plugin gives a serialized `HloModuleProto`, format "hlo").
    pub fn optimized_program(&self) -> Result<(String, Vec<u8>)> {
        let mut program = args!(PJRT_Program {});
        let mut a = args!(PJRT_Executable_OptimizedProgram_Args {
            executable: self.executable,
            program: &mut program,
        });
        // First call: the plugin writes the size; second call: it fills our buffer.
        call!(self.plugin(), PJRT_Executable_OptimizedProgram, &mut a)?;
        let mut code = vec![0u8; program.code_size];
        program.code = code.as_mut_ptr() as *mut _;
        let mut a = args!(PJRT_Executable_OptimizedProgram_Args {
            executable: self.executable,
            program: &mut program,
        });
        call!(self.plugin(), PJRT_Executable_OptimizedProgram, &mut a)?;
        code.truncate(program.code_size);
        Ok((Plugin::string(program.format, program.format_size), code))
    }
}

/// The module XLA dumped after its optimization passes (`*after_optimizations.txt`).
fn read_optimized_hlo(dir: &Path) -> Option<String> {
    let mut files: Vec<_> =
        std::fs::read_dir(dir).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    let path = files.into_iter().find(|p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().ends_with("after_optimizations.txt"))
    })?;
    std::fs::read_to_string(path).ok()
}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executable")
            .field("num_outputs", &self.num_outputs)
            .field("signature", &self.signature)
            .finish()
    }
}
