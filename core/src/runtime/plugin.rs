//! Loading a PJRT plugin: found by [`locate`](super::locate), opened once per path, initialized once,
//! its API version checked, and kept for the life of the process (XLA cannot be unloaded safely).

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::device::DeviceKind;
use super::ffi::{self, args, call};
use super::locate;
use super::options::PluginKind;
use super::quiet::quiet_stderr;
use crate::error::{PjrtErrorCode, Result};
use crate::Error;

/// A loaded, initialized PJRT plugin.
pub struct Plugin {
    api: &'static ffi::PJRT_Api,
    path: PathBuf,
    api_version: (i32, i32),
    kind: PluginKind,
}

// SAFETY: the PJRT C API is thread-safe; the API table is immutable after load.
unsafe impl Send for Plugin {}
// SAFETY: as above.
unsafe impl Sync for Plugin {}

/// Plugins loaded so far, by canonical path. Entries are leaked on purpose: a plugin stays loaded.
static LOADED: Mutex<Vec<&'static Plugin>> = Mutex::new(Vec::new());

impl Plugin {
    /// The plugin chosen by the environment: `XLAPROF_PJRT_PLUGIN`, else the plugin of the device
    /// `XLAPROF_DEVICE` names (the official CPU plugin by default; `cuda`: an official or JAX CUDA
    /// plugin) from the project's `.venv`, an active virtual environment, or the `python3` on PATH.
    pub fn from_env() -> Result<&'static Plugin> {
        Plugin::load(&default_plugin_path()?)
    }

    /// Loads the PJRT plugin at `path` (once per process; later calls return the same plugin).
    pub fn load(path: &Path) -> Result<&'static Plugin> {
        let canonical = path
            .canonicalize()
            .map_err(|e| Error::PluginLoad { path: path.to_path_buf(), reason: e.to_string() })?;
        let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = loaded.iter().find(|p| p.path == canonical) {
            return Ok(p);
        }
        // The name as given counts too: a symlink named like a CPU plugin may point elsewhere.
        let kind = match PluginKind::from_file_name(path) {
            PluginKind::Other => PluginKind::from_file_name(&canonical),
            kind => kind,
        };
        // The plugin's log lines while it loads and initializes stay off the terminal.
        let quiet = quiet_stderr();
        let plugin = open(&canonical, kind)?;
        let plugin: &'static Plugin = Box::leak(Box::new(plugin));
        plugin.initialize()?;
        drop(quiet);
        loaded.push(plugin);
        Ok(plugin)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The CPU plugin (which declares `cpu_device_count`), a GPU plugin or another (see
    /// [`PluginKind::from_file_name`]).
    pub fn kind(&self) -> PluginKind {
        self.kind
    }

    /// The PJRT C API version the plugin implements, `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        self.api_version
    }

    /// The raw API table, for benchmarks that compare against direct C calls.
    #[doc(hidden)]
    pub fn api(&self) -> &ffi::PJRT_Api {
        self.api
    }

    fn initialize(&self) -> Result<()> {
        if self.api.PJRT_Plugin_Initialize.is_none() {
            return Ok(()); // older plugins need no initialization
        }
        let mut a = args!(PJRT_Plugin_Initialize_Args {});
        call!(self, PJRT_Plugin_Initialize, &mut a)
    }

    /// Turns a `PJRT_Error*` into a `Result`, reading its code and message and freeing it.
    pub(crate) fn check(&self, err: *mut ffi::PJRT_Error, call: &'static str) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        let mut message = String::from("(no message)");
        if let Some(f) = self.api.PJRT_Error_Message {
            let mut a = args!(PJRT_Error_Message_Args { error: err });
            // SAFETY: `err` is a live error from this plugin; the message stays valid until destroy.
            unsafe {
                f(&mut a);
                if !a.message.is_null() {
                    let bytes = std::slice::from_raw_parts(a.message as *const u8, a.message_size);
                    message = String::from_utf8_lossy(bytes).into_owned();
                }
            }
        }
        let mut code = PjrtErrorCode::Unknown;
        if let Some(f) = self.api.PJRT_Error_GetCode {
            let mut a = args!(PJRT_Error_GetCode_Args { error: err });
            // SAFETY: as above; GetCode only reads the error.
            if unsafe { f(&mut a) }.is_null() {
                code = PjrtErrorCode::from_raw(a.code);
            }
        }
        if let Some(f) = self.api.PJRT_Error_Destroy {
            let mut a = args!(PJRT_Error_Destroy_Args { error: err });
            // SAFETY: the error is destroyed exactly once, here, after its last use.
            unsafe { f(&mut a) };
        }
        Err(Error::Pjrt { call, code, message })
    }

    /// Waits for a PJRT event, returns its status and destroys it. A null event is already done.
    pub(crate) fn await_event(&self, event: *mut ffi::PJRT_Event) -> Result<()> {
        if event.is_null() {
            return Ok(());
        }
        let mut a = args!(PJRT_Event_Await_Args { event: event });
        let status = call!(self, PJRT_Event_Await, &mut a);
        let mut d = args!(PJRT_Event_Destroy_Args { event: event });
        let destroyed = call!(self, PJRT_Event_Destroy, &mut d);
        status.and(destroyed)
    }

    /// Calls `then` once `event` has happened, with when (`events::now_ns` time) and its error, on
    /// the thread that completes it (at once, on this one, if it has). The event stays the
    /// caller's to await or destroy.
    pub(crate) fn on_event(
        &'static self,
        event: *mut ffi::PJRT_Event,
        then: Box<dyn FnOnce(u64, Result<()>) + Send>,
    ) -> Result<()> {
        let slot = Box::into_raw(Box::new(Then { plugin: self, then }));
        let mut a = args!(PJRT_Event_OnReady_Args {
            event: event,
            callback: Some(then_on_ready),
            user_arg: slot as *mut std::ffi::c_void,
        });
        let registered = call!(self, PJRT_Event_OnReady, &mut a);
        if registered.is_err() {
            // SAFETY: the callback was not registered, so `slot` is still ours alone.
            drop(unsafe { Box::from_raw(slot) });
        }
        registered
    }

    /// Whether a PJRT event has happened (a null event has). An error asking counts as ready:
    /// awaiting the event then reports it.
    pub(crate) fn event_ready(&self, event: *mut ffi::PJRT_Event) -> bool {
        if event.is_null() {
            return true;
        }
        let mut a = args!(PJRT_Event_IsReady_Args { event: event });
        call!(self, PJRT_Event_IsReady, &mut a).map_or(true, |()| a.is_ready)
    }

    /// Copies a (pointer, length) string owned by the plugin.
    pub(crate) fn string(ptr: *const c_char, len: usize) -> String {
        if ptr.is_null() {
            return String::new();
        }
        // SAFETY: PJRT returns `len` readable bytes at `ptr`, valid for the duration of this copy.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// What [`Plugin::on_event`]'s callback gets.
struct Then {
    plugin: &'static Plugin,
    then: Box<dyn FnOnce(u64, Result<()>) + Send>,
}

unsafe extern "C" fn then_on_ready(error: *mut ffi::PJRT_Error, user_arg: *mut std::ffi::c_void) {
    let at = crate::events::now_ns();
    // SAFETY: `user_arg` is the `Then` boxed for this callback alone, which runs once.
    let slot = unsafe { Box::from_raw(user_arg as *mut Then) };
    let status = slot.plugin.check(error, "PJRT_Event_OnReady");
    (slot.then)(at, status);
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .finish()
    }
}

/// The path `Plugin::from_env` loads: `XLAPROF_PJRT_PLUGIN` if set, else the plugin of the device
/// `XLAPROF_DEVICE` asks for, found in the project's or the active Python environment.
pub fn default_plugin_path() -> Result<PathBuf> {
    // An unknown device is an error even when a plugin path is given: it is a typo either way.
    let device = DeviceKind::from_env()?;
    if let Some(path) = std::env::var_os(locate::PLUGIN_ENV) {
        return Ok(PathBuf::from(path));
    }
    let mut roots = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))];
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    device.find_plugin(&roots)
}

fn open(path: &Path, kind: PluginKind) -> Result<Plugin> {
    let load_error = |reason: String| Error::PluginLoad { path: path.to_path_buf(), reason };
    // SAFETY: loading a shared library runs its initializers; a PJRT plugin's are benign, and the
    // library is never unloaded (it is leaked below), so no symbol outlives it.
    let library =
        unsafe { libloading::Library::new(path) }.map_err(|e| load_error(e.to_string()))?;
    type GetApi = unsafe extern "C" fn() -> *const ffi::PJRT_Api;
    // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin.
    let get_api = unsafe { library.get::<GetApi>(b"GetPjrtApi\0") }
        .map_err(|_| Error::NotAPjrtPlugin { path: path.to_path_buf() })?;
    // SAFETY: calling the plugin's entry point; it returns a pointer to a static table or null.
    let api = unsafe { get_api() };
    // SAFETY: a non-null table is static in the plugin, which stays loaded for the process.
    let api: &'static ffi::PJRT_Api = match unsafe { api.as_ref() } {
        Some(api) => api,
        None => return Err(load_error("GetPjrtApi returned no API table".into())),
    };
    std::mem::forget(library);
    let version = api.pjrt_api_version;
    let api_version = (version.major_version, version.minor_version);
    let built = (ffi::PJRT_API_MAJOR as i32, ffi::PJRT_API_MINOR as i32);
    if api_version.0 != built.0 {
        return Err(Error::ApiVersion {
            path: path.to_path_buf(),
            plugin_major: api_version.0,
            plugin_minor: api_version.1,
            built_major: built.0,
            built_minor: built.1,
        });
    }
    Ok(Plugin { api, path: path.to_path_buf(), api_version, kind })
}
