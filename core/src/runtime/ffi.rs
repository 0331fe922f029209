//! Raw bindings to the PJRT C API, generated at build time from the plugin's own `pjrt_c_api.h`.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code)]
#![allow(clippy::all, clippy::undocumented_unsafe_blocks)]

include!(concat!(env!("OUT_DIR"), "/pjrt_bindings.rs"));

/// Builds a PJRT argument struct: `struct_size` filled in, every unnamed field zero.
macro_rules! args {
    ($ty:ident { $($field:ident : $val:expr),* $(,)? }) => {
        $crate::runtime::ffi::$ty {
            struct_size: ::std::mem::size_of::<$crate::runtime::ffi::$ty>(),
            $($field: $val,)*
            ..Default::default()
        }
    };
}
pub(crate) use args;

/// Calls one function of the plugin's API table and turns its `PJRT_Error*` into a `Result`.
/// A function the plugin does not provide is an `Error::Unsupported`, never a null call.
/// The caller must pass an argument struct built with `args!` whose pointers are valid for the call.
macro_rules! call {
    ($plugin:expr, $func:ident, $args:expr) => {{
        let plugin: &$crate::runtime::plugin::Plugin = $plugin;
        match plugin.api().$func {
            None => Err($crate::Error::Unsupported(
                concat!(stringify!($func), " is not provided by this plugin").to_string(),
            )),
            // SAFETY: the function pointer comes from the plugin's API table, which lives as long as
            // the process (plugins are never unloaded); the caller guarantees the argument struct.
            Some(f) => plugin.check(unsafe { f($args) }, stringify!($func)),
        }
    }};
}
pub(crate) use call;
