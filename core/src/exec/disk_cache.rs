//! The persistent compile cache: serialized executables on disk, so a new process loads a graph
//! it compiled before instead of compiling it again (`XLAPROF_CACHE_DIR`).
//!
//! A cached executable is code that will run, so:
//! - the directory is created private to the user (0700), and one that others can write to is
//!   not used;
//! - each entry carries a checksum of its content, verified before it is handed to the plugin;
//! - an entry that fails any check (truncated, corrupt, written by another plugin) is removed and
//!   the graph is compiled again; it never crashes.
//!
//! Entries are written to a temporary file and renamed into place, so two processes sharing the
//! directory never see a half-written entry.
//!
//! Entry format, version 1: the line `xlaprof-executable 1`, then `key <hex>`, `checksum <hex>`
//! (of everything after the header), then the signature lines and `payload <bytes>`, then the
//! serialized executable.

use std::hash::Hasher;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ir::FastHasher;
use crate::runtime::{Client, Executable, Signature, TensorType};
use crate::DType;

const MAGIC: &str = "xlaprof-executable 1";

pub(crate) struct DiskCache {
    dir: PathBuf,
    /// Names the plugin build and the compile options: part of every entry's file name.
    salt: u64,
}

/// Why the disk cache is not used, for the one warning printed at startup. `wide_sums`: how the
/// engine lowers f32 sums (the graph's key does not say: the same graph lowers either way).
pub(crate) fn open(
    dir: &Path,
    client: &Client,
    device: usize,
    wide_sums: bool,
) -> Result<DiskCache, String> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{} can be written by other users; cached executables are code, so it is not used (chmod 700 it)",
            dir.display()
        ));
    }
    let mut h = FastHasher::default();
    let plugin = client.plugin().path();
    h.write(plugin.to_string_lossy().as_bytes());
    if let Ok(m) = std::fs::metadata(plugin) {
        h.write_u64(m.len());
        if let Ok(t) = m.modified() {
            h.write_u64(
                t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0),
            );
        }
    }
    h.write(client.platform_version().as_bytes());
    h.write_u64(device as u64);
    h.write_u8(wide_sums as u8);
    Ok(DiskCache { dir: dir.to_path_buf(), salt: h.finish() })
}

impl DiskCache {
    fn path(&self, key: u64) -> PathBuf {
        self.dir.join(format!("{key:016x}-{:016x}.xlaexe", self.salt))
    }

    /// The cached executable for `key`, if a valid entry exists. Invalid entries are removed.
    pub fn load(&self, client: &Client, key: u64) -> Option<Executable> {
        let path = self.path(key);
        let bytes = std::fs::read(&path).ok()?;
        let loaded = parse(&bytes, key).and_then(|(signature, payload)| {
            client.deserialize(payload, Some(signature)).map_err(|e| e.to_string())
        });
        match loaded {
            Ok(exe) => Some(exe),
            Err(reason) => {
                eprintln!(
                    "xlaprof: ignoring the cached executable {}: {reason}; compiling again",
                    path.display()
                );
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes the entry for `key` (best effort: a failure only costs a compile next time).
    pub fn store(&self, key: u64, exe: &Executable) {
        let (Some(signature), Ok(payload)) = (exe.signature(), exe.serialize()) else { return };
        let mut body = Vec::with_capacity(payload.len() + 256);
        body.extend_from_slice(signature_text(signature).as_bytes());
        body.extend_from_slice(format!("payload {}\n", payload.len()).as_bytes());
        body.extend_from_slice(&payload);
        let mut file =
            format!("{MAGIC}\nkey {key:016x}\nchecksum {:016x}\n", checksum(&body)).into_bytes();
        file.extend_from_slice(&body);

        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}-{key:016x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&file).and_then(|_| f.sync_all()));
        if written.is_err() || std::fs::rename(&tmp, self.path(key)).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

use std::os::unix::fs::OpenOptionsExt;

fn checksum(bytes: &[u8]) -> u64 {
    let mut h = FastHasher::default();
    h.write_u64(bytes.len() as u64);
    h.write(bytes);
    h.finish()
}

fn signature_text(sig: &Signature) -> String {
    let ty = |t: &TensorType| {
        let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
        format!("{} {}", t.dtype.mlir_name(), dims.join(","))
    };
    let mut s = String::new();
    for t in &sig.inputs {
        s += &format!("in {}\n", ty(t));
    }
    for t in &sig.outputs {
        s += &format!("out {}\n", ty(t));
    }
    let donated: Vec<String> = sig.donated.iter().map(|d| d.to_string()).collect();
    s += &format!("donated {}\n", donated.join(","));
    s
}

/// The next `\n`-terminated line at `*pos`, advancing past it.
fn next_line<'a>(bytes: &'a [u8], pos: &mut usize) -> Result<&'a str, String> {
    let rest = &bytes[*pos..];
    let end = rest.iter().position(|&b| b == b'\n').ok_or("truncated header")?;
    *pos += end + 1;
    std::str::from_utf8(&rest[..end]).map_err(|_| "corrupt header".to_string())
}

fn parse_type(t: &str) -> Result<TensorType, String> {
    let (dtype, dims) = t.split_once(' ').ok_or("bad type")?;
    let dtype = DType::from_mlir_name(dtype).ok_or("bad dtype")?;
    let dims = dims
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().map_err(|_| "bad dim".to_string()))
        .collect::<Result<_, _>>()?;
    Ok(TensorType { dtype, dims })
}

/// Checks an entry and splits it into the signature and XLA's serialized executable.
fn parse(bytes: &[u8], key: u64) -> Result<(Signature, &[u8]), String> {
    let mut pos = 0;
    if next_line(bytes, &mut pos)? != MAGIC {
        return Err("not an xlaprof cache entry of this version".into());
    }
    if next_line(bytes, &mut pos)? != format!("key {key:016x}") {
        return Err("entry for another graph".into());
    }
    let sum = next_line(bytes, &mut pos)?
        .strip_prefix("checksum ")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or("no checksum")?;
    if checksum(&bytes[pos..]) != sum {
        return Err("checksum mismatch (the entry is corrupt or truncated)".into());
    }
    let mut sig = Signature::default();
    loop {
        let l = next_line(bytes, &mut pos)?;
        if let Some(t) = l.strip_prefix("in ") {
            sig.inputs.push(parse_type(t)?);
        } else if let Some(t) = l.strip_prefix("out ") {
            sig.outputs.push(parse_type(t)?);
        } else if let Some(d) = l.strip_prefix("donated ") {
            sig.donated = d
                .split(',')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().map_err(|_| "bad donation".to_string()))
                .collect::<Result<_, _>>()?;
        } else if let Some(n) = l.strip_prefix("payload ") {
            let n: usize = n.parse().map_err(|_| "bad payload size")?;
            if n != bytes.len() - pos {
                return Err("payload size mismatch".into());
            }
            return Ok((sig, &bytes[pos..]));
        } else {
            return Err(format!("unexpected line {l:?}"));
        }
    }
}
