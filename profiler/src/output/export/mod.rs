//! Exports, all from the same profile and the same analysis.

pub mod chrome;
pub mod flame;
pub mod tables;

use std::path::Path;

use polars::prelude::{CsvWriter, ParquetWriter, SerWriter};

use crate::analysis::Analysis;
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::report;

/// What to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Short,
    Json,
    /// A folder of CSV tables.
    Csv,
    /// A folder of Parquet tables.
    Parquet,
    Chrome,
    Folded,
    Flamegraph,
}

impl Format {
    pub const NAMES: &'static str = "text, short, json, csv, parquet, chrome, folded, flamegraph";

    pub fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "text" => Format::Text,
            "short" => Format::Short,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "parquet" => Format::Parquet,
            "chrome" => Format::Chrome,
            "folded" => Format::Folded,
            "flamegraph" | "svg" => Format::Flamegraph,
            _ => return None,
        })
    }

    /// Tables go to a folder (one file per table); everything else is one file.
    pub fn is_folder(self) -> bool {
        matches!(self, Format::Csv | Format::Parquet)
    }
}

/// The JSON document: the profile and its analysis (schema in `docs/json-export.md`).
#[derive(serde::Serialize)]
pub struct JsonDocument<'a> {
    pub format: &'static str,
    pub version: u32,
    pub profile: &'a Profile,
    pub analysis: &'a Analysis,
}

pub fn json<'a>(p: &'a Profile, a: &'a Analysis) -> JsonDocument<'a> {
    JsonDocument { format: "xlaprof-json", version: 1, profile: p, analysis: a }
}

/// One-file formats as bytes.
pub fn to_bytes(p: &Profile, a: &Analysis, format: Format) -> Result<Vec<u8>> {
    Ok(match format {
        Format::Text => report::text(a).into_bytes(),
        Format::Short => report::short(a).into_bytes(),
        Format::Json => serde_json::to_vec_pretty(&json(p, a))
            .map_err(|e| Error::Export { what: "json", reason: e.to_string() })?,
        Format::Chrome => {
            let mut out = Vec::new();
            chrome::write(p, &mut out)
                .map_err(|e| Error::Export { what: "chrome trace", reason: e.to_string() })?;
            out
        }
        Format::Folded => {
            let mut s = flame::folded(p).join("\n");
            s.push('\n');
            s.into_bytes()
        }
        Format::Flamegraph => flame::svg(p)?,
        Format::Csv | Format::Parquet => {
            return Err(Error::Export {
                what: "tables",
                reason: "CSV and Parquet export to a folder".into(),
            })
        }
    })
}

/// Writes an export to `out` (a file, or a folder of tables for CSV and Parquet).
pub fn write(p: &Profile, a: &Analysis, format: Format, out: &Path) -> Result<()> {
    if !format.is_folder() {
        let bytes = to_bytes(p, a, format)?;
        return std::fs::write(out, bytes).map_err(|e| Error::io(out, e));
    }
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    for (name, mut df) in tables::tables(p, a)? {
        let ext = if format == Format::Csv { "csv" } else { "parquet" };
        let path = out.join(format!("{name}.{ext}"));
        let mut file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        let written = if format == Format::Csv {
            CsvWriter::new(&mut file).finish(&mut df).map(|_| ())
        } else {
            ParquetWriter::new(&mut file).finish(&mut df).map(|_| ())
        };
        written.map_err(|e| Error::Export {
            what: "tables",
            reason: format!("{}: {e}", path.display()),
        })?;
    }
    Ok(())
}
