//! The `xlaprof._native` extension module. The Python package `xlaprof` re-exports it with a
//! few pure-Python parts (the IPython extension, `nn.Module`, context managers).

mod args;
mod arith;
mod captured;
mod compiled_call;
mod debugging;
mod device;
mod dtype;
mod errors;
mod functions;
mod index;
mod inplace;
mod location;
mod nn;
mod ops;
mod profile;
mod replay;
mod spmd;
mod tensor;
mod torch_dispatch;
mod torch_guard;
mod trace;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    xlaprof_profiler::variables::set_source_of(location::source_of);
    m.add_class::<debugging::PyBlock>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<functions::NodeHandle>()?;
    m.add_class::<nn::PyLinear>()?;
    m.add_class::<nn::PyConv2d>()?;
    m.add_class::<nn::PyLayerNorm>()?;
    m.add_class::<nn::PyEmbedding>()?;
    m.add_class::<nn::PySgd>()?;
    m.add_class::<nn::PyAdam>()?;
    m.add_class::<profile::PyRecording>()?;
    m.add_class::<profile::PyProfile>()?;
    m.add_class::<functions::PyScope>()?;
    m.add_class::<spmd::PyMesh>()?;
    m.add_class::<replay::PyReplay>()?;
    m.add_class::<compiled_call::PyStandIn>()?;
    m.add_function(wrap_pyfunction!(compiled_call::compiled_arguments, m)?)?;
    m.add_class::<torch_guard::DeviceTypeAnswer>()?;
    m.add_function(wrap_pyfunction!(replay::materialize, m)?)?;
    m.add_function(wrap_pyfunction!(location::pin_location, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::get_1d_mesh, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::mark_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::set_global_mesh, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::shard_like, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::get_global_mesh, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::devices, m)?)?;
    m.add_function(wrap_pyfunction!(spmd::started_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(profile::load, m)?)?;
    m.add_function(wrap_pyfunction!(profile::record_from_env, m)?)?;
    m.add_function(wrap_pyfunction!(profile::whole_program_profile, m)?)?;
    m.add_function(wrap_pyfunction!(profile::whole_program_file, m)?)?;
    m.add_function(wrap_pyfunction!(profile::flush_whole_program, m)?)?;
    m.add_function(wrap_pyfunction!(profile::load_job, m)?)?;
    m.add_function(wrap_pyfunction!(profile::join_job, m)?)?;
    m.add_function(wrap_pyfunction!(profile::whole_program_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(profile::progress_html, m)?)?;
    m.add_function(wrap_pyfunction!(profile::validate_rules, m)?)?;
    m.add("DISPATCH_CODES", torch_dispatch::dispatch_codes(m.py())?)?;
    use functions::*;
    for f in [
        wrap_pyfunction!(manual_seed, m)?,
        wrap_pyfunction!(from_array, m)?,
        wrap_pyfunction!(from_bfloat16_bits, m)?,
        wrap_pyfunction!(assigned_variable, m)?,
        wrap_pyfunction!(break_on, m)?,
        wrap_pyfunction!(location::remember_source, m)?,
        wrap_pyfunction!(zeros, m)?,
        wrap_pyfunction!(ones, m)?,
        wrap_pyfunction!(full, m)?,
        wrap_pyfunction!(arange, m)?,
        wrap_pyfunction!(eye, m)?,
        wrap_pyfunction!(rand, m)?,
        wrap_pyfunction!(randn, m)?,
        wrap_pyfunction!(cat, m)?,
        wrap_pyfunction!(stack, m)?,
        wrap_pyfunction!(where_, m)?,
        wrap_pyfunction!(conv2d, m)?,
        wrap_pyfunction!(max_pool2d, m)?,
        wrap_pyfunction!(avg_pool2d, m)?,
        wrap_pyfunction!(cross_entropy, m)?,
        wrap_pyfunction!(layer_norm, m)?,
        wrap_pyfunction!(linear, m)?,
        wrap_pyfunction!(embedding, m)?,
        wrap_pyfunction!(dropout, m)?,
        wrap_pyfunction!(sync, m)?,
        wrap_pyfunction!(step, m)?,
        wrap_pyfunction!(wait, m)?,
        wrap_pyfunction!(runs_ahead, m)?,
        wrap_pyfunction!(read_computed, m)?,
        wrap_pyfunction!(compute_with, m)?,
        wrap_pyfunction!(node_handle, m)?,
        wrap_pyfunction!(needs, m)?,
        wrap_pyfunction!(no_grad_enter, m)?,
        wrap_pyfunction!(no_grad_exit, m)?,
        wrap_pyfunction!(is_grad_enabled, m)?,
        wrap_pyfunction!(counters, m)?,
        wrap_pyfunction!(set_package_dir, m)?,
        wrap_pyfunction!(add_internal_dir, m)?,
        wrap_pyfunction!(add_library_dir, m)?,
        wrap_pyfunction!(host_fallback, m)?,
        wrap_pyfunction!(size_read, m)?,
        wrap_pyfunction!(data_wait, m)?,
        wrap_pyfunction!(profiling, m)?,
        wrap_pyfunction!(collective_enter, m)?,
        wrap_pyfunction!(collective_leave, m)?,
        wrap_pyfunction!(caught, m)?,
        wrap_pyfunction!(infer_dims, m)?,
        wrap_pyfunction!(captured::captured_graph, m)?,
        wrap_pyfunction!(captured::function_compiled, m)?,
        wrap_pyfunction!(captured::graph_break, m)?,
        wrap_pyfunction!(captured::captured_run, m)?,
        wrap_pyfunction!(captured::mark_step, m)?,
        wrap_pyfunction!(debugging::explain, m)?,
        wrap_pyfunction!(set_file_namer, m)?,
        wrap_pyfunction!(source_files, m)?,
        wrap_pyfunction!(_trace_cost_probe, m)?,
        wrap_pyfunction!(torch_dispatch::torch_bridge_init, m)?,
        wrap_pyfunction!(torch_dispatch::torch_dispatch, m)?,
        wrap_pyfunction!(torch_dispatch::link_view, m)?,
        wrap_pyfunction!(torch_dispatch::torch_view, m)?,
        wrap_pyfunction!(torch_guard::take_guard_error, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
