//! The options a client is created with (`PJRT_Client_Create`'s `create_options`), and which of
//! them reach which plugin.
//!
//! XLA's CUDA plugin validates its create options against the set it declares and rejects any
//! other name ("Unexpected option name passed to PJRT_Client_Create: cpu_device_count"), so an
//! option is sent only to a plugin that declares it: the CPU plugin's `cpu_device_count` goes to the CPU plugin alone, and
//! any other plugin starts with no options unless the user gives some in
//! `XLAPROF_PJRT_CREATE_OPTIONS` (`name=value,name=value`), which reach whatever plugin is loaded.

use std::marker::PhantomData;
use std::path::Path;

use super::ffi::{self, args};
use crate::error::Result;
use crate::Error;

/// Environment variable with create options for the plugin, e.g.
/// `memory_fraction=0.5,preallocate=false` for a CUDA plugin.
pub const CREATE_OPTIONS_ENV: &str = "XLAPROF_PJRT_CREATE_OPTIONS";

/// A create option's value, one of PJRT's `PJRT_NamedValue` types.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    String(String),
    Int(i64),
    IntList(Vec<i64>),
    Float(f32),
    Bool(bool),
}

/// One create option.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateOption {
    pub name: String,
    pub value: OptionValue,
}

/// Which family a plugin belongs to, as far as create options go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// XLA's CPU plugin: it declares `cpu_device_count`.
    Cpu,
    /// XLA's GPU plugin (CUDA or ROCm, official or JAX's): it declares the allocator's options
    /// (`preallocate`, `memory_fraction`, `allocator`).
    Gpu,
    /// Any other plugin (TPU, ...): no option is assumed.
    Other,
}

impl PluginKind {
    /// The kind of the plugin in the file at `path`, told by its file name: `xla_cpu_pjrt.so` (the
    /// `xla-cpu-pjrt` wheel) and `pjrt_c_api_cpu_plugin.so` (XLA's own build) are CPU plugins;
    /// any file name with `cpu` as one of its words is taken for one.
    ///
    /// Likewise a file name with `cuda`, `gpu` or `rocm` as a word is a GPU plugin's (XLA's
    /// `xla_gpu_pjrt.so`, JAX's `xla_cuda_plugin.so`).
    ///
    /// Why the name: the plugin cannot say which it is before a client exists.
    /// `PJRT_Plugin_Attributes` carries only versions (`xla_version`, `stablehlo_*`), the platform
    /// name comes from a client, and the CUDA plugin refuses to create a client with an option it
    /// does not declare, so sending `cpu_device_count` to find out is not an option either. Every
    /// CPU plugin that XLA builds or ships has `cpu` in its file name, and no GPU or TPU plugin
    /// has. A CPU plugin under another name still starts (with its default of 4 devices; the
    /// engine uses the first), and `XLAPROF_PJRT_CREATE_OPTIONS=cpu_device_count=1` gives it the
    /// option by hand.
    pub fn from_file_name(path: &Path) -> PluginKind {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase());
        let has_word = |words: &[&str]| {
            name.as_ref().is_some_and(|n| {
                n.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| words.contains(&w))
            })
        };
        if has_word(&["cpu"]) {
            PluginKind::Cpu
        } else if has_word(&["cuda", "gpu", "rocm"]) {
            PluginKind::Gpu
        } else {
            PluginKind::Other
        }
    }
}

/// Options given to the plugin when the client is created.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    options: Vec<(CreateOption, Reach)>,
}

/// Which plugins an option is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Only the CPU plugin declares it.
    CpuPlugin,
    /// Only a GPU plugin declares it.
    GpuPlugin,
    /// The caller names it for whatever plugin is loaded.
    AnyPlugin,
}

impl ClientOptions {
    /// Number of CPU devices for the CPU plugin (`cpu_device_count`); without it the plugin
    /// makes 4. Sent to the CPU plugin only: other plugins reject options they do not declare.
    pub fn cpu_device_count(mut self, count: i64) -> Self {
        let option =
            CreateOption { name: "cpu_device_count".into(), value: OptionValue::Int(count) };
        self.options.push((option, Reach::CpuPlugin));
        self
    }

    /// Whether a GPU plugin takes most of the device's memory at start (its default: 75 %) or
    /// grows its pool as programs need it (`preallocate`). Sent to GPU plugins only.
    pub fn gpu_preallocate(mut self, preallocate: bool) -> Self {
        let option =
            CreateOption { name: "preallocate".into(), value: OptionValue::Bool(preallocate) };
        self.options.push((option, Reach::GpuPlugin));
        self
    }

    /// Any integer create option; sent to whichever plugin is loaded.
    pub fn int_option(self, name: &str, value: i64) -> Self {
        self.option(name, OptionValue::Int(value))
    }

    /// Any create option; sent to whichever plugin is loaded.
    pub fn option(mut self, name: &str, value: OptionValue) -> Self {
        self.options.push((CreateOption { name: name.to_string(), value }, Reach::AnyPlugin));
        self
    }

    /// What a plugin of `kind` is created with: these options that it declares, then `user`'s
    /// (from `XLAPROF_PJRT_CREATE_OPTIONS`), which replace any of the same name.
    pub fn resolve(&self, kind: PluginKind, user: &[CreateOption]) -> Vec<CreateOption> {
        let mut out: Vec<CreateOption> = self
            .options
            .iter()
            .filter(|(_, reach)| match reach {
                Reach::AnyPlugin => true,
                Reach::CpuPlugin => kind == PluginKind::Cpu,
                Reach::GpuPlugin => kind == PluginKind::Gpu,
            })
            .map(|(option, _)| option.clone())
            .filter(|option| !user.iter().any(|u| u.name == option.name))
            .collect();
        // A later option of the same name replaces an earlier one.
        let mut deduped: Vec<CreateOption> = Vec::with_capacity(out.len());
        for option in out.drain(..) {
            deduped.retain(|o| o.name != option.name);
            deduped.push(option);
        }
        deduped.extend(user.iter().cloned());
        deduped
    }
}

/// The options in `XLAPROF_PJRT_CREATE_OPTIONS`; none when it is unset or empty.
pub fn env_create_options() -> Result<Vec<CreateOption>> {
    match std::env::var_os(CREATE_OPTIONS_ENV) {
        None => Ok(Vec::new()),
        Some(text) => match text.to_str() {
            Some(text) => parse_create_options(text),
            None => Err(Error::CreateOptions { message: "the value is not valid UTF-8".into() }),
        },
    }
}

/// Parses `name=value,name=value`. Values are typed by their form: `true`/`false` a bool, an
/// integer an int64, a number with `.` or an exponent a float, `[0,1]` a list of int64, a quoted
/// `"text"` or `'text'` a string (the way to write one that looks like a number), and any other
/// bare word a string. Whitespace around names, values and commas is ignored; a name given twice,
/// a missing `=` or value, an unclosed quote or bracket, an integer out of range are errors.
pub fn parse_create_options(text: &str) -> Result<Vec<CreateOption>> {
    let err = |message: String| Error::CreateOptions { message };
    let mut options: Vec<CreateOption> = Vec::new();
    for item in split_top_level(text).map_err(err)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some((name, value)) = item.split_once('=') else {
            return Err(err(format!("`{item}` has no `=`: write name=value")));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(err(format!("`{item}` has no option name before `=`")));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return Err(err(format!(
                "option name `{name}` may only hold letters, digits, `_`, `-` and `.`"
            )));
        }
        if options.iter().any(|o| o.name == name) {
            return Err(err(format!("option `{name}` is given twice")));
        }
        let value = parse_value(value).map_err(|why| err(format!("option `{name}`: {why}")))?;
        options.push(CreateOption { name: name.to_string(), value });
    }
    Ok(options)
}

/// Splits at commas that are outside quotes and brackets.
fn split_top_level(text: &str) -> std::result::Result<Vec<&str>, String> {
    let mut items = Vec::new();
    let (mut start, mut quote, mut depth) = (0, None::<char>, 0usize);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth =
                    depth.checked_sub(1).ok_or_else(|| format!("`]` without `[` in `{text}`"))?
            }
            (None, ',') if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if let Some(q) = quote {
        return Err(format!("unclosed {q} in `{text}`"));
    }
    if depth > 0 {
        return Err(format!("unclosed `[` in `{text}`"));
    }
    items.push(&text[start..]);
    Ok(items)
}

fn parse_value(value: &str) -> std::result::Result<OptionValue, String> {
    if value.is_empty() {
        return Err("no value after `=` (write \"\" for an empty string)".into());
    }
    for q in ['"', '\''] {
        if value.starts_with(q) {
            return match value[1..].strip_suffix(q) {
                Some(inner) if !inner.contains(q) => Ok(OptionValue::String(inner.to_string())),
                _ => Err(format!("`{value}` is not one quoted string")),
            };
        }
    }
    if let Some(list) = value.strip_prefix('[') {
        let Some(list) = list.strip_suffix(']') else {
            return Err(format!("`{value}` is not a list like [0,1]"));
        };
        if list.trim().is_empty() {
            return Ok(OptionValue::IntList(Vec::new()));
        }
        return list
            .split(',')
            .map(|x| {
                x.trim().parse::<i64>().map_err(|_| {
                    format!("`{}` in `{value}` is not an integer (lists hold integers)", x.trim())
                })
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(OptionValue::IntList);
    }
    if value.eq_ignore_ascii_case("true") {
        return Ok(OptionValue::Bool(true));
    }
    if value.eq_ignore_ascii_case("false") {
        return Ok(OptionValue::Bool(false));
    }
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return value
            .parse::<i64>()
            .map(OptionValue::Int)
            .map_err(|_| format!("`{value}` is out of the range of a 64-bit integer"));
    }
    let numeric_start = digits.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if numeric_start {
        if let Ok(x) = value.parse::<f64>() {
            let single = x as f32;
            if !single.is_finite() {
                return Err(format!("`{value}` does not fit a 32-bit float"));
            }
            return Ok(OptionValue::Float(single));
        }
    }
    if value.contains(['"', '\'', '[', ']', '=']) || value.contains(char::is_whitespace) {
        return Err(format!(
            "`{value}` is not a value: quote a string that holds these characters"
        ));
    }
    Ok(OptionValue::String(value.to_string()))
}

/// The options as PJRT's `PJRT_NamedValue` array; it points into `options`, which it borrows.
pub(crate) struct NamedValues<'a> {
    raw: Vec<ffi::PJRT_NamedValue>,
    _options: PhantomData<&'a [CreateOption]>,
}

impl<'a> NamedValues<'a> {
    pub(crate) fn new(options: &'a [CreateOption]) -> NamedValues<'a> {
        let raw = options
            .iter()
            .map(|option| {
                let mut v = args!(PJRT_NamedValue {
                    name: option.name.as_ptr() as *const _,
                    name_size: option.name.len(),
                });
                match &option.value {
                    OptionValue::String(s) => {
                        v.type_ = ffi::PJRT_NamedValue_kString;
                        v.__bindgen_anon_1.string_value = s.as_ptr() as *const _;
                        v.value_size = s.len();
                    }
                    OptionValue::Int(x) => {
                        v.type_ = ffi::PJRT_NamedValue_kInt64;
                        v.__bindgen_anon_1.int64_value = *x;
                        v.value_size = 1;
                    }
                    OptionValue::IntList(xs) => {
                        v.type_ = ffi::PJRT_NamedValue_kInt64List;
                        v.__bindgen_anon_1.int64_array_value = xs.as_ptr();
                        v.value_size = xs.len();
                    }
                    OptionValue::Float(x) => {
                        v.type_ = ffi::PJRT_NamedValue_kFloat;
                        v.__bindgen_anon_1.float_value = *x;
                        v.value_size = 1;
                    }
                    OptionValue::Bool(b) => {
                        v.type_ = ffi::PJRT_NamedValue_kBool;
                        v.__bindgen_anon_1.bool_value = *b;
                        v.value_size = 1;
                    }
                }
                v
            })
            .collect();
        NamedValues { raw, _options: PhantomData }
    }

    pub(crate) fn as_ptr(&self) -> *const ffi::PJRT_NamedValue {
        self.raw.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.raw.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> OptionValue {
        let mut parsed = parse_create_options(text).unwrap();
        assert_eq!(parsed.len(), 1, "{text}");
        parsed.remove(0).value
    }

    #[test]
    fn values_are_typed_by_their_form() {
        assert_eq!(one("n=3"), OptionValue::Int(3));
        assert_eq!(one("n=-3"), OptionValue::Int(-3));
        assert_eq!(one("f=0.5"), OptionValue::Float(0.5));
        assert_eq!(one("f=1e-3"), OptionValue::Float(1e-3));
        assert_eq!(one("b=TRUE"), OptionValue::Bool(true));
        assert_eq!(one("s=cuda_async"), OptionValue::String("cuda_async".into()));
        assert_eq!(one("s=\"12\""), OptionValue::String("12".into()));
        assert_eq!(one("s='a, b=c'"), OptionValue::String("a, b=c".into()));
        assert_eq!(one("s=\"\""), OptionValue::String(String::new()));
        assert_eq!(one("l=[0, 1 ,2]"), OptionValue::IntList(vec![0, 1, 2]));
        assert_eq!(one("l=[]"), OptionValue::IntList(vec![]));
    }

    #[test]
    fn pairs_split_at_top_level_commas_only() {
        let parsed = parse_create_options(
            " visible_devices=[0,1] , memory_fraction=0.75,preallocate=false,",
        )
        .unwrap();
        let names: Vec<&str> = parsed.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["visible_devices", "memory_fraction", "preallocate"]);
        assert!(parse_create_options("").unwrap().is_empty());
        assert!(parse_create_options("  ").unwrap().is_empty());
    }

    #[test]
    fn malformed_text_is_a_clear_error() {
        for (text, says) in [
            ("preallocate", "has no `=`"),
            ("=1", "no option name"),
            ("a b=1", "may only hold"),
            ("a=", "no value"),
            ("a=1,a=2", "given twice"),
            ("a=\"x", "unclosed \""),
            ("a=[1,2", "unclosed `[`"),
            ("a=1]", "`]` without `[`"),
            ("a=[1,x]", "`x` in `[1,x]` is not an integer"),
            ("a=99999999999999999999", "out of the range"),
            ("a=1e99", "32-bit float"),
            ("a=\"x\"y", "not one quoted string"),
            ("a=x y", "quote a string"),
        ] {
            let err = parse_create_options(text).unwrap_err();
            assert!(matches!(err, Error::CreateOptions { .. }), "{text}: {err:?}");
            let shown = err.to_string();
            assert!(shown.contains(says), "{text}: {shown}");
            assert!(shown.starts_with("XLAPROF_PJRT_CREATE_OPTIONS: "), "{shown}");
        }
    }

    #[test]
    fn cpu_options_reach_the_cpu_plugin_only() {
        let options = ClientOptions::default().cpu_device_count(1);
        let cpu = options.resolve(PluginKind::Cpu, &[]);
        assert_eq!(
            cpu,
            [CreateOption { name: "cpu_device_count".into(), value: OptionValue::Int(1) }]
        );
        assert!(options.resolve(PluginKind::Other, &[]).is_empty());

        let user = parse_create_options("memory_fraction=0.5,cpu_device_count=2").unwrap();
        assert_eq!(options.resolve(PluginKind::Other, &user), user);
        assert_eq!(options.resolve(PluginKind::Cpu, &user), user, "the user's value replaces ours");

        let gpu = ClientOptions::default().cpu_device_count(1).gpu_preallocate(false);
        assert_eq!(
            gpu.resolve(PluginKind::Gpu, &[]),
            [CreateOption { name: "preallocate".into(), value: OptionValue::Bool(false) }]
        );
        assert!(gpu.resolve(PluginKind::Other, &[]).is_empty());
        let user = parse_create_options("preallocate=true").unwrap();
        assert_eq!(gpu.resolve(PluginKind::Gpu, &user), user, "the user's value replaces ours");

        let any = ClientOptions::default().int_option("num_nodes", 1);
        assert_eq!(any.resolve(PluginKind::Other, &[]).len(), 1);
    }

    #[test]
    fn plugins_are_told_apart_by_file_name() {
        for cpu in ["/x/xla_cpu_pjrt.so", "pjrt_c_api_cpu_plugin.so", "/a/CPU-plugin.so"] {
            assert_eq!(PluginKind::from_file_name(Path::new(cpu)), PluginKind::Cpu, "{cpu}");
        }
        for gpu in [
            "/x/xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so",
            "/x/jax_plugins/xla_cuda13/xla_cuda_plugin.so",
            "pjrt_c_api_gpu_plugin.so",
            "/x/xla_rocm_plugin.so",
        ] {
            assert_eq!(PluginKind::from_file_name(Path::new(gpu)), PluginKind::Gpu, "{gpu}");
        }
        for other in ["/cpu/libtpu.so", "xla_cudax.so", "xla_cpux.so"] {
            assert_eq!(PluginKind::from_file_name(Path::new(other)), PluginKind::Other, "{other}");
        }
    }
}
