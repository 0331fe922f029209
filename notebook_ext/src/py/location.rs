//! The Python source line of every op: the innermost frame outside the `xlaprof` package, read
//! through CPython's frame API and interned per (code object, instruction), so recording an op
//! costs a frame lookup and a hash lookup, not a string allocation.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use xlaprof_core::location::ExternalLocation;

/// What is known about one code object.
struct Code {
    /// The code's file as Python knows it (a path, or a notebook cell's file).
    path: String,
    /// Code of the `xlaprof` package itself: ops are located at its caller.
    internal: bool,
    file: Arc<str>,
    function: Arc<str>,
}

#[derive(Default)]
struct Interned {
    codes: HashMap<usize, Code>,
    sites: HashMap<(usize, i32), Arc<ExternalLocation>>,
    /// Folder of the package's Python files (set once at import).
    package_dir: String,
    /// Maps a code object's file name to the name shown in profiles (notebook cells: `In[5]`).
    namer: Option<Py<PyAny>>,
    /// The real path behind each name shown, so views can show the text of a line.
    paths: HashMap<String, String>,
}

thread_local! {
    static INTERNED: RefCell<Interned> = RefCell::new(Interned::default());
}

pub(crate) fn set_package_dir(dir: String) {
    INTERNED.with(|i| i.borrow_mut().package_dir = dir);
}

pub(crate) fn set_file_namer(namer: Option<Py<PyAny>>) {
    INTERNED.with(|i| {
        let mut i = i.borrow_mut();
        i.namer = namer;
        // Names already given may change under a new namer.
        i.codes.clear();
        i.sites.clear();
    });
}

/// The real path of each file name shown in locations so far.
pub(crate) fn source_files() -> HashMap<String, String> {
    INTERNED.with(|i| i.borrow().paths.clone())
}

/// The location of the user's code that called into the extension, if a Python frame runs.
pub(crate) fn current(py: Python<'_>) -> Option<Arc<ExternalLocation>> {
    // SAFETY: the GIL is held (`py`); PyEval_GetFrame returns a borrowed frame of this thread or
    // null. Every new reference (code, back frame) is released before returning.
    unsafe {
        let mut frame = ffi::PyEval_GetFrame();
        let mut owned: Option<*mut ffi::PyFrameObject> = None;
        let mut found = None;
        for _ in 0..64 {
            if frame.is_null() {
                break;
            }
            let code = ffi::PyFrame_GetCode(frame);
            let key = code as usize;
            let internal = INTERNED.with(|i| {
                let mut i = i.borrow_mut();
                if !i.codes.contains_key(&key) {
                    let info = describe(py, code, &i.package_dir, i.namer.as_ref());
                    let (shown, path) = (info.file.to_string(), info.path.clone());
                    i.paths.insert(shown, path);
                    // Keep the code object alive: its address is the cache key.
                    ffi::Py_INCREF(code.cast());
                    i.codes.insert(key, info);
                }
                i.codes[&key].internal
            });
            if !internal {
                let lasti = ffi::PyFrame_GetLasti(frame);
                found = Some(INTERNED.with(|i| {
                    let mut i = i.borrow_mut();
                    if let Some(loc) = i.sites.get(&(key, lasti)) {
                        return loc.clone();
                    }
                    let line = ffi::PyFrame_GetLineNumber(frame).max(0) as u32;
                    let info = &i.codes[&key];
                    let loc = Arc::new(ExternalLocation {
                        file: info.file.to_string(),
                        line,
                        function: info.function.to_string(),
                    });
                    i.sites.insert((key, lasti), loc.clone());
                    loc
                }));
            }
            ffi::Py_DECREF(code.cast());
            if found.is_some() {
                break;
            }
            let back = ffi::PyFrame_GetBack(frame);
            if let Some(prev) = owned.take() {
                ffi::Py_DECREF(prev.cast());
            }
            owned = (!back.is_null()).then_some(back);
            frame = back;
        }
        if let Some(prev) = owned {
            ffi::Py_DECREF(prev.cast());
        }
        found
    }
}

/// Reads a code object's file and function names.
///
/// # Safety
/// `code` is a live code object and the GIL is held.
unsafe fn describe(
    py: Python<'_>,
    code: *mut ffi::PyCodeObject,
    package_dir: &str,
    namer: Option<&Py<PyAny>>,
) -> Code {
    // SAFETY: the caller guarantees a live code object; borrowed for this call only.
    let code = unsafe { Bound::from_borrowed_ptr(py, code.cast()) };
    let text = |attr: &str| {
        code.getattr(attr).and_then(|v| v.extract::<String>()).unwrap_or_else(|_| "?".into())
    };
    let path = text("co_filename");
    let function = text("co_qualname");
    let internal = !package_dir.is_empty() && path.starts_with(package_dir);
    let named = namer
        .and_then(|n| n.call1(py, (path.as_str(),)).ok())
        .and_then(|v| v.extract::<String>(py).ok());
    // Profiles are shared: keep the file's name, not this machine's folders.
    let file = named.unwrap_or_else(|| {
        std::path::Path::new(&path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(path.clone())
    });
    Code { path, internal, file: file.into(), function: function.into() }
}
