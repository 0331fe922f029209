//! The Python source line of every op: the innermost frame outside the `xlaprof` package, read
//! through CPython's frame API and interned per (code object, instruction), so recording an op
//! costs a frame lookup and a hash lookup, not a string allocation.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::ffi;
use pyo3::prelude::*;
use xlaprof_core::location::ExternalLocation;

/// What is known about one code object.
struct Code {
    /// Code of the `xlaprof` package itself: ops are located at its caller.
    internal: bool,
    /// A library's code (installed packages, the standard library): a sync or fallback caused
    /// there is reported at the user's line that called into it.
    library: bool,
    file: Arc<str>,
    function: Arc<str>,
}

/// How code is named, the same on every thread (set at import, and by the notebook extension).
struct Naming {
    /// Folders whose code is never the user's: the package's own Python files first, then
    /// libraries it drives (torch, for the torch bridge), so an op is located at the user's line
    /// and not inside `torch.nn`.
    internal_dirs: Vec<String>,
    /// Folders of libraries' code (site-packages, the standard library).
    library_dirs: Vec<String>,
    /// Maps a code object's file name to the name shown in profiles (notebook cells: `In[5]`).
    namer: Option<Py<PyAny>>,
}

static NAMING: Mutex<Naming> =
    Mutex::new(Naming { internal_dirs: Vec::new(), library_dirs: Vec::new(), namer: None });
/// Bumped when `NAMING` changes: names a thread interned before are stale.
static NAMING_VERSION: AtomicU64 = AtomicU64::new(0);
/// The real path behind each name shown, so views can show the text of a line.
static PATHS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// Locks one of the statics above. Nothing runs Python code while holding one (a thread that
/// did could give up the GIL while another waits for the lock with it), and none is poisoned
/// by a panic that left it consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This thread's names, interned per code object and per instruction.
#[derive(Default)]
struct Interned {
    codes: HashMap<usize, Code>,
    sites: HashMap<(usize, i32), Arc<ExternalLocation>>,
    /// The `NAMING_VERSION` the names were made under.
    version: u64,
}

thread_local! {
    static INTERNED: RefCell<Interned> = RefCell::new(Interned::default());
    /// For a thread other than the main one, the main thread's ident (found on first use).
    static MAIN_IF_OTHER: Cell<Option<Option<u64>>> = const { Cell::new(None) };
}

pub(crate) fn set_package_dir(dir: String) {
    let mut naming = lock(&NAMING);
    match naming.internal_dirs.first_mut() {
        Some(first) => *first = dir,
        None => naming.internal_dirs.push(dir),
    }
    NAMING_VERSION.fetch_add(1, Ordering::Relaxed);
}

/// Marks a library's folder as not the user's code (after the package's own, set first).
pub(crate) fn add_internal_dir(dir: String) {
    let mut naming = lock(&NAMING);
    if naming.internal_dirs.is_empty() {
        naming.internal_dirs.push(String::new());
    }
    if !naming.internal_dirs.contains(&dir) {
        naming.internal_dirs.push(dir);
    }
    NAMING_VERSION.fetch_add(1, Ordering::Relaxed);
}

/// Marks a folder as libraries' code (not the user's, but not hidden either: see `Code::library`).
pub(crate) fn add_library_dir(dir: String) {
    let mut naming = lock(&NAMING);
    if !naming.library_dirs.contains(&dir) {
        naming.library_dirs.push(dir);
    }
    NAMING_VERSION.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn set_file_namer(namer: Option<Py<PyAny>>) {
    // The old namer is dropped after the lock is released: its drop may run Python code.
    let _old = std::mem::replace(&mut lock(&NAMING).namer, namer);
    NAMING_VERSION.fetch_add(1, Ordering::Relaxed);
}

/// The text of code that is in no file (a notebook cell), by the path Python gave it.
static SOURCES: Mutex<BTreeMap<String, Arc<str>>> = Mutex::new(BTreeMap::new());

/// Keeps the text of code run from no file (a notebook cell), for the profiler.
#[pyfunction]
pub(crate) fn remember_source(path: String, text: &str) {
    lock(&SOURCES).insert(path, Arc::from(text));
}

/// The text of a file name shown in locations: a cell's remembered text, else the file's.
pub(crate) fn source_of(shown: &str) -> Option<String> {
    let path = lock(&PATHS).get(shown)?.clone();
    if let Some(text) = lock(&SOURCES).get(&path) {
        return Some(text.to_string());
    }
    xlaprof_profiler::variables::read_source(std::path::Path::new(&path))
}

/// The real path of each file name shown in locations so far, on any thread.
pub(crate) fn source_files() -> HashMap<String, String> {
    lock(&PATHS).iter().map(|(shown, path)| (shown.clone(), path.clone())).collect()
}

/// The location of the user's code that called into the extension, if a Python frame runs.
pub(crate) fn current(py: Python<'_>) -> Option<Arc<ExternalLocation>> {
    locate(py, false)
}

thread_local! {
    /// A location every op recorded on this thread takes instead of its Python caller's, while
    /// set (`pin_location`): torch.compile's graphs are recorded by the backend's own loop, each
    /// op at the user's line that its graph node came from.
    static PINNED: std::cell::RefCell<Option<Arc<ExternalLocation>>> =
        const { std::cell::RefCell::new(None) };
}

/// Records this thread's ops at `frames` (a stack, innermost first) until called with `None`.
#[pyfunction]
#[pyo3(signature = (frames=None))]
pub(crate) fn pin_location(py: Python<'_>, frames: Option<Vec<(String, u32, String)>>) {
    let pinned = frames.and_then(|f| from_stack(py, &f));
    PINNED.with(|p| *p.borrow_mut() = pinned);
}

/// [`current`], and when that line is a library's, the user's line that called into the library
/// (for syncs, value reads and fallbacks: a walk further up the stack, too dear for every op).
pub(crate) fn current_with_caller(py: Python<'_>) -> Option<Arc<ExternalLocation>> {
    locate(py, true)
}

fn locate(py: Python<'_>, with_caller: bool) -> Option<Arc<ExternalLocation>> {
    if let Some(pinned) = PINNED.with(|p| p.borrow().clone()) {
        return Some(pinned);
    }
    let version = NAMING_VERSION.load(Ordering::Relaxed);
    INTERNED.with(|i| {
        let mut i = i.borrow_mut();
        if i.version != version {
            // Names already given may change under a new namer or package folder.
            i.codes.clear();
            i.sites.clear();
            i.version = version;
        }
    });
    // SAFETY: the GIL is held (`py`); PyEval_GetFrame returns a borrowed frame of this thread or
    // null.
    let here = unsafe { user_frame(py, ffi::PyEval_GetFrame(), with_caller) };
    if here.is_some() {
        return here;
    }
    waiting_caller(py, with_caller)
}

/// Where the main thread waits, for an op recorded on a thread that runs no user code: torch's
/// autograd runs a device's backward on a thread of its own while `loss.backward()` waits, and
/// that line is where the backward's ops come from.
fn waiting_caller(py: Python<'_>, with_caller: bool) -> Option<Arc<ExternalLocation>> {
    let main = MAIN_IF_OTHER.with(|known| {
        if let Some(main) = known.get() {
            return main;
        }
        // Once per thread: the main thread's ident, or None on the main thread itself.
        let main = (|| {
            let threading = py.import("threading").ok()?;
            let main: u64 = threading
                .call_method0("main_thread")
                .ok()?
                .getattr("ident")
                .ok()?
                .extract()
                .ok()?;
            let current: u64 = threading.call_method0("get_ident").ok()?.extract().ok()?;
            (current != main).then_some(main)
        })();
        known.set(Some(main));
        main
    })?;
    if MAIN_IS_OLDEST.load(Ordering::Relaxed) == YES {
        // SAFETY: the GIL is held; the frame is a new reference, released after the walk.
        return unsafe {
            let frame = oldest_thread_frame();
            if frame.is_null() {
                return None;
            }
            let found = user_frame(py, frame, with_caller);
            ffi::Py_DECREF(frame.cast());
            found
        };
    }
    // `sys._current_frames()` makes a dict of every thread's frame: 5 µs, for every op of a
    // backward. Once, it also tells whether the main thread's state is the oldest in the
    // interpreter (CPython adds new ones at the head of its list, so it is unless the program
    // made its own), which is then read directly.
    let frames = py.import("sys").ok()?.call_method0("_current_frames").ok()?;
    let frame = frames.get_item(main).ok()?;
    if MAIN_IS_OLDEST.load(Ordering::Relaxed) == UNKNOWN {
        // SAFETY: as above; the oldest state's frame is compared by address, then released.
        let oldest = unsafe {
            let f = oldest_thread_frame();
            if !f.is_null() {
                ffi::Py_DECREF(f.cast());
            }
            f
        };
        let same = std::ptr::eq(oldest.cast::<ffi::PyObject>(), frame.as_ptr());
        MAIN_IS_OLDEST.store(if same { YES } else { NO }, Ordering::Relaxed);
    }
    // SAFETY: the GIL is held; `frame` is a live frame object kept alive by `frame` for the call.
    unsafe { user_frame(py, frame.as_ptr().cast(), with_caller) }
}

/// Whether the main thread's state is the interpreter's oldest: not yet known, yes, no.
static MAIN_IS_OLDEST: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;

/// The current frame of this interpreter's oldest thread state (the last in its list): a new
/// reference, or null.
///
/// # Safety
/// The GIL is held.
unsafe fn oldest_thread_frame() -> *mut ffi::PyFrameObject {
    // SAFETY: with the GIL held no thread state is made or deleted while the list is walked.
    unsafe {
        let mut state = ffi::PyInterpreterState_ThreadHead(ffi::PyInterpreterState_Get());
        let mut oldest = state;
        while !state.is_null() {
            oldest = state;
            state = ffi::PyThreadState_Next(state);
        }
        ffi::PyThreadState_GetFrame(oldest)
    }
}

/// The innermost frame from `frame` outwards that is not internal, as a location. With
/// `with_caller`, when that frame is a library's, the location also names the user's frame that
/// called into the library (the innermost one outwards that is neither internal nor a library's).
///
/// # Safety
/// The GIL is held and `frame` is a borrowed frame object or null. Every new reference (code,
/// back frame) is released before returning.
unsafe fn user_frame(
    py: Python<'_>,
    frame: *mut ffi::PyFrameObject,
    with_caller: bool,
) -> Option<Arc<ExternalLocation>> {
    // SAFETY: the caller holds the GIL and passes a borrowed frame or null; the code objects
    // and back frames taken below are released before returning.
    unsafe {
        let mut frame = frame;
        let mut owned: Option<*mut ffi::PyFrameObject> = None;
        let mut found: Option<Arc<ExternalLocation>> = None;
        for _ in 0..64 {
            if frame.is_null() {
                break;
            }
            let code = ffi::PyFrame_GetCode(frame);
            let key = code as usize;
            let (internal, library) = kinds(py, code, key);
            if !internal && (found.is_none() || !library) {
                let here = site(frame, key);
                match found.take() {
                    // The library's line, reached from this line of the user's.
                    Some(inner) => {
                        found = Some(Arc::new(ExternalLocation {
                            caller: Some(here),
                            ..(*inner).clone()
                        }));
                        ffi::Py_DECREF(code.cast());
                        break;
                    }
                    None => {
                        found = Some(here);
                        if !(with_caller && library) {
                            ffi::Py_DECREF(code.cast());
                            break;
                        }
                    }
                }
            }
            ffi::Py_DECREF(code.cast());
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

/// Whether a code object is the package's own and whether it is a library's, from this
/// thread's interned names (described on first sight).
///
/// # Safety
/// The GIL is held and `code` is a live code object.
unsafe fn kinds(py: Python<'_>, code: *mut ffi::PyCodeObject, key: usize) -> (bool, bool) {
    let known = INTERNED.with(|i| i.borrow().codes.get(&key).map(|c| (c.internal, c.library)));
    if let Some(kinds) = known {
        return kinds;
    }
    // Described outside the borrow: the namer is Python code.
    // SAFETY: as the caller guarantees.
    let info = unsafe { describe(py, code) };
    let kinds = (info.internal, info.library);
    INTERNED.with(|i| {
        i.borrow_mut().codes.entry(key).or_insert_with(|| {
            // Keep the code object alive: its address is the cache key.
            // SAFETY: `code` is live; the reference taken here is kept with the entry.
            unsafe { ffi::Py_INCREF(code.cast()) };
            info
        });
    });
    kinds
}

/// The interned location of the instruction `frame` is at, in the code described under `key`.
///
/// # Safety
/// The GIL is held and `frame` is a live frame whose code was described under `key`.
unsafe fn site(frame: *mut ffi::PyFrameObject, key: usize) -> Arc<ExternalLocation> {
    // SAFETY: as the caller guarantees.
    let lasti = unsafe { instruction(frame) };
    INTERNED.with(|i| {
        let mut i = i.borrow_mut();
        if let Some(loc) = i.sites.get(&(key, lasti)) {
            return loc.clone();
        }
        // SAFETY: as the caller guarantees.
        let line = unsafe { ffi::PyFrame_GetLineNumber(frame) }.max(0) as u32;
        let info = &i.codes[&key];
        let loc = Arc::new(ExternalLocation {
            file: info.file.to_string(),
            line,
            function: info.function.to_string(),
            caller: None,
        });
        i.sites.insert((key, lasti), loc.clone());
        loc
    })
}

/// The offset of the instruction `frame` is at (3.11 and up), the cheap key of its line; on 3.10,
/// which has no function for it, the line itself.
///
/// # Safety
/// The GIL is held and `frame` is a live frame.
#[cfg(Py_3_11)]
unsafe fn instruction(frame: *mut ffi::PyFrameObject) -> i32 {
    // SAFETY: as the caller guarantees.
    unsafe { ffi::PyFrame_GetLasti(frame) }
}

#[cfg(not(Py_3_11))]
unsafe fn instruction(frame: *mut ffi::PyFrameObject) -> i32 {
    // SAFETY: as the caller guarantees.
    unsafe { ffi::PyFrame_GetLineNumber(frame) }
}

/// A line given by path (a front end's record of a stack, torch.compile's): the innermost frame
/// of `frames` (innermost first) outside the package, named as the frame reader names it; when
/// it is a library's, with the user's line that called into it.
pub(crate) fn from_stack(
    py: Python<'_>,
    frames: &[(String, u32, String)],
) -> Option<Arc<ExternalLocation>> {
    let mut found: Option<Arc<ExternalLocation>> = None;
    for (path, line, function) in frames {
        let (internal, library) = kinds_of(path);
        if internal || (found.is_some() && library) {
            continue;
        }
        let here = Arc::new(ExternalLocation {
            file: shown_name(py, path),
            line: *line,
            function: function.clone(),
            caller: None,
        });
        match found.take() {
            Some(inner) => {
                return Some(Arc::new(ExternalLocation { caller: Some(here), ..(*inner).clone() }))
            }
            None if library => found = Some(here),
            None => return Some(here),
        }
    }
    found
}

/// A frame as given, even one of this package or of a library (which [`from_stack`] passes
/// over): where no frame of the program is at hand, the frame that was, named as any file is.
/// None given: an unknown place (`?`).
pub(crate) fn as_given(
    py: Python<'_>,
    frame: Option<&(String, u32, String)>,
) -> Arc<ExternalLocation> {
    let (file, line, function) = match frame {
        Some((path, line, function)) => (shown_name(py, path), *line, function.clone()),
        None => ("?".to_string(), 0, String::new()),
    };
    Arc::new(ExternalLocation { file, line, function, caller: None })
}

/// Reads a code object's file and function names, and notes the real path behind the name.
///
/// # Safety
/// `code` is a live code object and the GIL is held.
unsafe fn describe(py: Python<'_>, code: *mut ffi::PyCodeObject) -> Code {
    // SAFETY: the caller guarantees a live code object; borrowed for this call only.
    let code = unsafe { Bound::from_borrowed_ptr(py, code.cast()) };
    let text = |attr: &str| {
        code.getattr(attr).and_then(|v| v.extract::<String>()).unwrap_or_else(|_| "?".into())
    };
    let path = text("co_filename");
    let function = text("co_qualname");
    let (internal, library) = kinds_of(&path);
    Code { internal, library, file: shown_name(py, &path).into(), function: function.into() }
}

/// Whether code in the file at `path` is the package's own, and whether it is a library's.
fn kinds_of(path: &str) -> (bool, bool) {
    let naming = lock(&NAMING);
    let under =
        |dirs: &[String]| dirs.iter().any(|d| !d.is_empty() && path.starts_with(d.as_str()));
    (
        under(&naming.internal_dirs),
        under(&naming.library_dirs) || path.starts_with('<') && path.contains("frozen"),
    )
}

/// The name the file at `path` is shown by (the namer's, else the file's own name), noting the
/// real path behind it.
fn shown_name(py: Python<'_>, path: &str) -> String {
    // The namer is Python code: called after the lock is released.
    let namer = lock(&NAMING).namer.as_ref().map(|n| n.clone_ref(py));
    let named =
        namer.and_then(|n| n.call1(py, (path,)).ok()).and_then(|v| v.extract::<String>(py).ok());
    // Profiles are shared: keep the file's name, not this machine's folders.
    let file = named.unwrap_or_else(|| {
        std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string())
    });
    lock(&PATHS).insert(file.clone(), path.to_string());
    file
}
