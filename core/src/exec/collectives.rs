//! The collectives of a partitioned program, read from XLA's optimized HLO text: what XLA's
//! partitioner inserted (all-reduce, all-gather, ...), how many bytes each moves to a device,
//! between which devices, and for which of the user's ops.
//!
//! The text is XLA's dump format, e.g.
//! `%all-reduce.6 = (f32[16,32]{1,0}, f32[]) all-reduce(%dot.13, %r), channel_id=1,
//! replica_groups=[1,4]<=[4], ..., metadata={op_name="v87" source_file=...}`. The op name is the
//! name the lowering gave the node (`v87`: node 87), so its line is the node's.

use crate::dtype::DType;
use crate::events::Collective;
use crate::location::SourceLocation;
use crate::shape::Shape;

const KINDS: [&str; 5] =
    ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"];

/// Every collective in `hlo`; `location_of(n)` is where node `n` of the lowered graph was recorded.
pub(crate) fn collectives(
    hlo: &str,
    location_of: impl Fn(usize) -> Option<SourceLocation>,
) -> Vec<Collective> {
    hlo.lines().filter_map(|line| parse(line.trim(), &location_of)).collect()
}

fn parse(line: &str, location_of: &impl Fn(usize) -> Option<SourceLocation>) -> Option<Collective> {
    let line = line.strip_prefix("ROOT ").unwrap_or(line);
    let (_, rhs) = line.split_once(" = ")?;
    // `SHAPE KIND(` with KIND one of the collectives, or its asynchronous `-start` form.
    let (kind, at) = KINDS.iter().find_map(|k| {
        [format!(" {k}("), format!(" {k}-start(")]
            .iter()
            .find_map(|pattern| rhs.find(pattern.as_str()).map(|at| (*k, at)))
    })?;
    let shapes = shapes(&rhs[..at]);
    let bytes = shapes.iter().map(|s| s.element_count() as u64 * s.dtype.size_bytes() as u64).sum();
    let attrs = &rhs[at..];
    let groups = value_of(attrs, "replica_groups=").unwrap_or_default();
    let location = value_of(attrs, "op_name=\"")
        .and_then(|name| name.trim_end_matches('"').strip_prefix('v')?.parse().ok())
        .and_then(location_of);
    Some(Collective { kind: kind.to_string(), shapes, bytes, groups, location })
}

/// The array shapes in a result type: `f32[16,32]{1,0}` or a tuple of them.
fn shapes(text: &str) -> Vec<Shape> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let name_start =
            rest[..open].rfind(|c: char| !c.is_ascii_alphanumeric()).map_or(0, |i| i + 1);
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        let dims: Option<Vec<i64>> = rest[open + 1..close]
            .split(',')
            .filter(|d| !d.is_empty())
            .map(|d| d.trim().parse().ok())
            .collect();
        if let (Some(dtype), Some(dims)) = (hlo_dtype(&rest[name_start..open]), dims) {
            out.push(Shape::new(dtype, dims));
        }
        rest = &rest[close + 1..];
    }
    out
}

/// XLA spells element types as `DType`'s `Display` does, but for `pred`.
fn hlo_dtype(name: &str) -> Option<DType> {
    match name {
        "pred" => Some(DType::Pred),
        _ => DType::ALL.into_iter().find(|d| d.to_string() == name),
    }
}

/// The text after `key` up to the next `, ` or `}` outside brackets (`{{0,1},{2,3}}`,
/// `[1,4]<=[4]`).
fn value_of(attrs: &str, key: &str) -> Option<String> {
    let start = attrs.find(key)? + key.len();
    let mut depth = 0i32;
    let text = &attrs[start..];
    for (i, c) in text.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' if depth == 0 => return Some(text[..i].to_string()),
            '}' | ']' | ')' => depth -= 1,
            ',' | ' ' if depth == 0 => return Some(text[..i].to_string()),
            _ => {}
        }
    }
    Some(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HLO: &str = r#"
  %all-gather = f32[256]{0} all-gather(%bitcast.2), channel_id=7, replica_groups=[1,4]<=[4], dimensions={0}, use_global_device_ids=true
  %all-reduce.6 = (f32[16,32]{1,0}, f32[32]{0}, /*index=5*/f32[]) all-reduce(%dot.13, %r.1, %s), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=%add.clone, metadata={op_name="v87" source_file="x.rs" source_line=137}
  %get-tuple-element.11 = f32[16,32]{1,0} get-tuple-element(%all-reduce.6), index=0, metadata={op_name="dot.9"}
  %ars = (f32[8]{0}, u32[]) all-reduce-start(%x), replica_groups={}
"#;

    #[test]
    fn collectives_are_read_with_their_bytes_groups_and_node() {
        let found = collectives(HLO, |n| {
            (n == 87).then(|| {
                SourceLocation::External(std::sync::Arc::new(crate::location::ExternalLocation {
                    file: "train.py".into(),
                    line: 12,
                    function: "step".into(),
                    caller: None,
                }))
            })
        });
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0].kind, "all-gather");
        assert_eq!(found[0].bytes, 1024);
        assert_eq!(found[0].groups, "[1,4]<=[4]");
        assert!(found[0].location.is_none());
        assert_eq!(found[1].kind, "all-reduce");
        assert_eq!(found[1].shapes.len(), 3);
        assert_eq!(found[1].bytes, (16 * 32 + 32 + 1) * 4);
        assert_eq!(found[1].groups, "{{0,1},{2,3}}");
        assert_eq!(found[1].location.as_ref().map(|l| l.line()), Some(12));
        assert_eq!(found[2].kind, "all-reduce");
        assert_eq!(found[2].bytes, 32);
    }
}
