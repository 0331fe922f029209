//! With the `python` feature: the cfgs of the Python version built for (`Py_3_11` and up), as
//! pyo3 sets them for itself, so that the frame reading uses what each version has.

fn main() {
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
}
