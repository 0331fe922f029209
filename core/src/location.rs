//! Where in the user's program an op was recorded or a sync was asked for.
//!
//! Rust callers are located for free with `#[track_caller]`; other front ends (Python) set the
//! location of the ops they record with [`with_location`], so diagnostics point at their lines.

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::sync::Arc;

/// A line of user code: file, line, and (when the front end knows it) the function.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum SourceLocation {
    Rust(&'static Location<'static>),
    External(Arc<ExternalLocation>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalLocation {
    pub file: String,
    pub line: u32,
    pub function: String,
    /// When this line is a library's (transformers, the standard library), the user's line that
    /// called into it: where a sync or a fallback caused inside a library is reported. Found
    /// for syncs, value reads and fallbacks only, not for every op.
    pub caller: Option<Arc<ExternalLocation>>,
}

impl SourceLocation {
    /// The location of the caller of a `#[track_caller]` API function, unless a front end has set
    /// one for the current thread.
    #[track_caller]
    pub fn caller() -> SourceLocation {
        let caller = Location::caller();
        OVERRIDE.with(|o| match &*o.borrow() {
            Some(set) => set.clone(),
            None => SourceLocation::Rust(caller),
        })
    }

    /// A number naming the call site (equal for every op recorded at the same line).
    pub(crate) fn site_id(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        match self {
            SourceLocation::Rust(l) => *l as *const Location<'static> as usize as u64,
            SourceLocation::External(e) => {
                let mut h = crate::ir::FastHasher::default();
                (&e.file, e.line).hash(&mut h);
                h.finish()
            }
        }
    }

    pub fn file(&self) -> &str {
        match self {
            SourceLocation::Rust(l) => l.file(),
            SourceLocation::External(e) => &e.file,
        }
    }

    pub fn line(&self) -> u32 {
        match self {
            SourceLocation::Rust(l) => l.line(),
            SourceLocation::External(e) => e.line,
        }
    }

    pub fn function(&self) -> Option<&str> {
        match self {
            SourceLocation::Rust(_) => None,
            SourceLocation::External(e) => Some(e.function.as_str()).filter(|f| !f.is_empty()),
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file(), self.line())?;
        if let Some(function) = self.function() {
            write!(f, " in {function}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

thread_local! {
    static OVERRIDE: RefCell<Option<SourceLocation>> = const { RefCell::new(None) };
}

/// Runs `f` with every op it records located at `location` (used by the Python front end).
pub fn with_location<R>(location: ExternalLocation, f: impl FnOnce() -> R) -> R {
    with_shared_location(Arc::new(location), f)
}

/// Like [`with_location`], for a location the front end has interned once and shares between
/// calls (no allocation per op: the Python front end records each op this way).
pub fn with_shared_location<R>(location: Arc<ExternalLocation>, f: impl FnOnce() -> R) -> R {
    let location = SourceLocation::External(location);
    let _restore = Restore(OVERRIDE.with(|o| o.borrow_mut().replace(location)));
    f()
}

/// Puts back the previous location when dropped, also when the op body unwinds.
struct Restore(Option<SourceLocation>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        OVERRIDE.with(|o| *o.borrow_mut() = previous);
    }
}

/// Runs a composite op's body so that the primitives it records carry the user's line, not the
/// composite's. The outermost location wins.
pub(crate) fn scoped<R>(location: &SourceLocation, f: impl FnOnce() -> R) -> R {
    let outermost = OVERRIDE.with(|o| {
        let mut o = o.borrow_mut();
        let outermost = o.is_none();
        if outermost {
            *o = Some(location.clone());
        }
        outermost
    });
    // Only the outermost scope clears the location again.
    let _restore = outermost.then(|| Restore(None));
    f()
}
