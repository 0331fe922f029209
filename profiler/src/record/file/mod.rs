//! The profile file format, version 2.
//!
//! ```text
//! header   8 bytes  b"XLAPROF\0"
//!          2 bytes  format version, little endian (2)
//!          2 bytes  reserved, zero
//! records  repeated until the end of the file:
//!          4 bytes  payload length, little endian
//!          4 bytes  CRC-32 (IEEE) of the payload, little endian
//!          n bytes  payload: one `Record` in postcard encoding (varint integers, serde order)
//! ```
//!
//! Compatibility: postcard is not self-describing, so any change to `Record` or the types in it
//! is a new format version. A new version keeps the old version's record types to decode old
//! files, and `tests/data/profile-vN.xlaprof` of every version must keep loading.
//!
//! Versions: 1 described a graph's nodes as text, and the engine's counters as a struct of 13
//! fields; 2 describes nodes as data (`NodeRec`: op, attributes, operands, shape, location,
//! hash), and counters by the engine's names, written once in `Meta`, with a list of values at
//! each sync (so a counter the engine gains needs no new version). Version-1 files are read by
//! `v1`.
//!
//! Records are appended while the program runs, one `write` per sync or step: the records since
//! the last write go out when a sync or a step ends, before a compile starts (so a crash during a
//! long compile still shows what was being compiled), when a collective is entered (so a job
//! stuck in one shows where), whenever 64 KiB are waiting, and at most 200 ms after they were
//! recorded. A crash loses at most what happened in the last 200 ms, and a viewer can follow the
//! file live.
//!
//! A reader takes every complete, intact record: a truncated tail or a record whose checksum
//! fails is reported in the profile's warnings with what was lost, never as a failure. An intact
//! record can still be crafted: the profile it is applied to (`Profile::apply`) bounds what it
//! names by what was read (a location id by the number of records), and drops the rest with a
//! warning.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::record::Record;

mod v1;

pub const MAGIC: &[u8; 8] = b"XLAPROF\0";
pub const VERSION: u16 = 2;
const HEADER_BYTES: usize = 12;
const FRAME_BYTES: usize = 8;
/// No record comes near this; a larger length means the framing itself is damaged.
const MAX_RECORD_BYTES: usize = 256 << 20;

/// Appends records to a profile file.
pub struct Writer {
    file: File,
    /// Where it writes: the path asked for, or the one beside it (see `create`).
    path: PathBuf,
    /// The path asked for.
    asked: PathBuf,
    bytes: u64,
    records: u64,
}

impl Writer {
    /// Creates the file, holding a lock on it while it writes. Where another process writes
    /// that file now (two processes given one `XLAPROF_PROFILE`), its records go beside it, in a
    /// file named by this process (`run.4711.xlaprof`; `path()` says which), never into it.
    pub fn create(path: &Path) -> Result<Writer> {
        let path_arg = path;
        let (mut file, path) = match Writer::open_locked(path)? {
            Some(file) => (file, path.to_path_buf()),
            None => {
                let beside = beside(path, &std::process::id().to_string());
                let file = Writer::open_locked(&beside)?.ok_or_else(|| {
                    Error::io(&beside, std::io::Error::other("another process writes it"))
                })?;
                (file, beside)
            }
        };
        file.write_all(&header()).map_err(|e| Error::io(&path, e))?;
        Ok(Writer { file, path, asked: path_arg.to_path_buf(), bytes: HEADER_BYTES as u64, records: 0 })
    }

    /// The file at `path`, emptied and locked, or None where another process holds its lock
    /// (its content is left as it is: opened without truncating, emptied once locked).
    fn open_locked(path: &Path) -> Result<Option<File>> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            // A file system without locks: written as before.
            Err(std::fs::TryLockError::Error(_)) => {}
        }
        file.set_len(0).map_err(|e| Error::io(path, e))?;
        Ok(Some(file))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This process turned out to be rank `rank` of a job (it learnt so when it joined the
    /// job's process group, as `torch.multiprocessing.spawn`'s processes do): its file moves to
    /// the rank's name beside the one asked for (`job.rank1.xlaprof`), and writing goes on there
    /// (the open file moves with its name).
    pub fn move_to_rank(&mut self, rank: u32) -> std::io::Result<()> {
        let to = beside(&job_name(&self.asked), &format!("rank{rank}"));
        if to != self.path {
            std::fs::rename(&self.path, &to)?;
            self.path = to;
        }
        Ok(())
    }

    /// Writes one record with a single `write` call.
    pub fn append(&mut self, record: &Record) -> std::io::Result<()> {
        self.append_frames(&frame(record), 1)
    }

    /// Writes already framed records (see [`frame`]) with a single `write` call.
    pub fn append_frames(&mut self, frames: &[u8], records: u64) -> std::io::Result<()> {
        self.file.write_all(frames)?;
        self.bytes += frames.len() as u64;
        self.records += records;
        Ok(())
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    pub fn records_written(&self) -> u64 {
        self.records
    }
}

/// `run.xlaprof` with `tag` before its extension: `run.<tag>.xlaprof`.
pub fn beside(path: &Path, tag: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{tag}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{tag}"),
    };
    path.with_file_name(name)
}

/// The profiles a job's ranks wrote for `path` (`job.rank0.xlaprof`, `job.rank1.xlaprof`, ... for
/// `job.xlaprof`), in rank order; empty where there are none. Where there are, they are the job
/// (`path` itself, if written, is a launcher's that ran no rank: `torch.multiprocessing.spawn`'s
/// parent).
pub fn job_files(path: &Path) -> Vec<PathBuf> {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!("{stem}.rank");
    let mut ranks: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rank = name.strip_prefix(&prefix)?.strip_suffix(&ext)?.parse::<u32>().ok()?;
            Some((rank, entry.path()))
        })
        .collect();
    ranks.sort();
    ranks.into_iter().map(|(_, p)| p).collect()
}

/// The job's name a rank's file is named after: `job.xlaprof` for `job.rank1.xlaprof` (any other
/// path is its own).
fn job_name(path: &Path) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    match stem.rsplit_once(".rank") {
        Some((job, rank)) if !rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit()) => {
            let name = match path.extension() {
                Some(ext) => format!("{job}.{}", ext.to_string_lossy()),
                None => job.to_string(),
            };
            path.with_file_name(name)
        }
        _ => path.to_path_buf(),
    }
}

/// A record with its length and checksum, ready to append.
pub fn frame(record: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    frame_into(&mut out, record);
    out
}

/// Appends a framed record (see [`frame`]) to `out`, encoding it in place: the recorder frames
/// every event into its pending buffer this way, without an allocation per record.
pub fn frame_into(out: &mut Vec<u8>, record: &Record) {
    /// Lends `out` to postcard without giving it away (an encoding error would drop it).
    struct Append<'a>(&'a mut Vec<u8>);
    impl Extend<u8> for Append<'_> {
        fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
            self.0.extend(bytes);
        }
    }
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_BYTES]);
    if postcard::to_extend(record, Append(out)).is_err() {
        out.truncate(start + FRAME_BYTES); // an empty payload, as a record that cannot be encoded
    }
    let payload = &out[start + FRAME_BYTES..];
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32fast::hash(payload).to_le_bytes();
    out[start..start + 4].copy_from_slice(&len);
    out[start + 4..start + FRAME_BYTES].copy_from_slice(&crc);
}

/// The header of a file of this version (for writing profiles to memory).
pub fn header() -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_BYTES);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&[0, 0]);
    h
}

/// What a read produced: the intact records, and a sentence for each thing that was lost.
#[derive(Debug, Default)]
pub struct Decoded {
    pub records: Vec<Record>,
    pub warnings: Vec<String>,
    /// Bytes consumed; a follower continues from here.
    pub consumed: usize,
}

/// Decodes a whole profile held in memory.
pub fn decode(bytes: &[u8]) -> Result<Decoded> {
    let version = check_header(bytes)?;
    let mut decoded = decode_records(&bytes[HEADER_BYTES..], HEADER_BYTES, true, version);
    decoded.consumed += HEADER_BYTES;
    Ok(decoded)
}

/// The file's format version, once the header is known good.
fn check_header(bytes: &[u8]) -> Result<u16> {
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err(Error::NotAProfile);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version > VERSION {
        return Err(Error::NewerFormat { version, supported: VERSION });
    }
    Ok(version)
}

/// Decodes consecutive records. `at_end`: the data is the whole file (a partial last record is
/// then a loss to report, not something still being written).
fn decode_records(bytes: &[u8], base_offset: usize, at_end: bool, version: u16) -> Decoded {
    let mut out = Decoded::default();
    let mut pos = 0;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < FRAME_BYTES {
            if at_end {
                out.warnings.push(format!(
                    "the file ends in the middle of a record header at byte {}: the last {} bytes were lost (the program was still writing or crashed)",
                    base_offset + pos,
                    rest.len()
                ));
            }
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_RECORD_BYTES {
            out.warnings.push(format!(
                "the record framing is damaged at byte {}: the remaining {} bytes could not be read",
                base_offset + pos,
                rest.len()
            ));
            pos = bytes.len();
            break;
        }
        if rest.len() < FRAME_BYTES + len {
            if at_end {
                out.warnings.push(format!(
                    "the file ends in the middle of a record at byte {}: {} of its {} bytes are missing (the program was still writing or crashed)",
                    base_offset + pos,
                    FRAME_BYTES + len - rest.len(),
                    FRAME_BYTES + len
                ));
            }
            break;
        }
        let payload = &rest[FRAME_BYTES..FRAME_BYTES + len];
        pos += FRAME_BYTES + len;
        if crc32fast::hash(payload) != crc {
            out.warnings.push(format!(
                "the record at byte {} is corrupt (checksum mismatch) and was skipped",
                base_offset + pos - FRAME_BYTES - len
            ));
            continue;
        }
        let record = match version {
            1 => v1::decode(payload),
            _ => postcard::from_bytes::<Record>(payload).ok(),
        };
        match record {
            Some(record) => out.records.push(record),
            None => out.warnings.push(format!(
                "the record at byte {} could not be decoded (written by a newer xlaprof?) and was skipped",
                base_offset + pos - FRAME_BYTES - len
            )),
        }
    }
    out.consumed = pos;
    out
}

/// Reads a profile file, tolerating damage (see [`decode`]).
pub fn read(path: &Path) -> Result<Decoded> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    decode(&bytes).map_err(|e| e.in_file(path))
}

/// Reads a file that may still be growing: each call returns the records completed since the
/// last one.
pub struct Follower {
    file: File,
    offset: u64,
    pending: Vec<u8>,
    /// The header's format version, once it was read and checked; until then the header waits,
    /// partly written, in `pending`.
    version: Option<u16>,
}

impl Follower {
    pub fn open(path: &Path) -> Result<Follower> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut f = Follower { file, offset: 0, pending: Vec::new(), version: None };
        // Only the header is read here; the records are `poll`'s.
        (&mut f.file)
            .take(HEADER_BYTES as u64)
            .read_to_end(&mut f.pending)
            .map_err(|e| Error::io(path, e))?;
        f.offset = f.pending.len() as u64;
        f.take_header().map_err(|e| e.in_file(path))?;
        Ok(f)
    }

    /// Checks the header and drops it from `pending` once all of it is there: a header that
    /// arrives late (the file was created but not yet written) is checked like one there from
    /// the start.
    fn take_header(&mut self) -> Result<()> {
        if self.version.is_some() || self.pending.len() < HEADER_BYTES {
            return Ok(());
        }
        self.version = Some(check_header(&self.pending)?);
        self.pending.drain(..HEADER_BYTES);
        Ok(())
    }

    /// Records appended since the last call (complete ones only).
    pub fn poll(&mut self) -> std::io::Result<Decoded> {
        self.file.seek(SeekFrom::Start(self.offset))?;
        let mut fresh = Vec::new();
        self.file.read_to_end(&mut fresh)?;
        self.offset += fresh.len() as u64;
        self.pending.extend_from_slice(&fresh);
        self.take_header().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let Some(version) = self.version else {
            return Ok(Decoded::default());
        };
        // `pending` is the file's unread tail: warnings name bytes by their place in the file.
        let base_offset = self.offset as usize - self.pending.len();
        let decoded = decode_records(&self.pending, base_offset, false, version);
        self.pending.drain(..decoded.consumed);
        Ok(decoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranks_file_is_named_after_its_jobs() {
        let rank1 = job_name(Path::new("out/job.rank1.xlaprof"));
        assert_eq!(rank1, Path::new("out/job.xlaprof"));
        assert_eq!(job_name(Path::new("job.xlaprof")), Path::new("job.xlaprof"));
        assert_eq!(job_name(Path::new("job.ranking.xlaprof")), Path::new("job.ranking.xlaprof"));
        assert_eq!(beside(&job_name(Path::new("job.rank0.xlaprof")), "rank3"), Path::new("job.rank3.xlaprof"));
    }

    #[test]
    fn a_jobs_files_are_found_in_rank_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["job.rank10.xlaprof", "job.rank2.xlaprof", "job.xlaprof", "job.4711.xlaprof", "other.rank0.xlaprof"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let names: Vec<String> = job_files(&dir.path().join("job.xlaprof"))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["job.rank2.xlaprof", "job.rank10.xlaprof"]);
    }
}
