//! What the debugging tools caught (`detect_anomaly`, `forbid_sync`, `break_on`,
//! `compare_with_eager`, `XLAPROF_CHECK`): each a finding at the line behind it, first in the
//! list, since it is what the program stopped on.

use std::collections::BTreeMap;

use xlaprof_core::events::Tool;

use super::{times, Diagnostic, Instance, Kind};
use crate::profile::Profile;

pub(super) fn findings(p: &Profile) -> Vec<Diagnostic> {
    let mut sites: BTreeMap<(Kind, u32), Vec<&crate::profile::Caught>> = BTreeMap::new();
    for c in &p.caught {
        // A tool this build does not know (a newer writer's) still shows, as a break does.
        let kind = Tool::from_name(&c.tool).map_or(Kind::Break, kind_of);
        sites.entry((kind, c.location)).or_default().push(c);
    }
    sites
        .into_iter()
        .map(|((kind, location), caught)| {
            let first = &caught[0].message;
            let message = match caught.len() {
                1 => first.clone(),
                n => format!("{first} ({} at this line)", times(n)),
            };
            let instances = caught
                .iter()
                .map(|c| Instance {
                    message: format!("step {}: {}", c.step, c.message),
                    sync: None,
                    step: Some(c.step),
                    cost_ns: 0,
                })
                .collect();
            Diagnostic::new(p, kind, location, message, advice(kind), instances, Vec::new())
        })
        .collect()
}

fn kind_of(tool: Tool) -> Kind {
    match tool {
        Tool::Anomaly => Kind::Anomaly,
        Tool::ForbiddenSync => Kind::ForbiddenSync,
        Tool::Break => Kind::Break,
        Tool::Divergence => Kind::Divergence,
        Tool::IndexCheck => Kind::IndexOutOfRange,
        Tool::RangeCheck => Kind::ValueOutOfRange,
    }
}

fn advice(kind: Kind) -> Option<String> {
    let text = match kind {
        Kind::Anomaly => "look at the inputs' ranges it names: a log or a division of zero, an overflow in a half-precision dtype (scale the loss, or compute it in float32), or weights a learning rate blew up",
        Kind::ForbiddenSync => "keep the value on the device (tensor ops instead of .item(), print or `if t:`), or read it after the block",
        Kind::Divergence => "the op's lowering and torch's kernel disagree at that line: compare its dtype and arguments with torch's; a custom op's backward is the usual suspect",
        Kind::IndexOutOfRange => "an index past the size it indexes: torch's CPU and CUDA kernels raise here too; with XLAPROF_CHECK=0, XLA clamps it and reads a neighbour silently",
        Kind::ValueOutOfRange => "an argument outside what its op takes (a length past the input it measures): torch's CPU and CUDA kernels raise here too; with XLAPROF_CHECK=0 the device computes on with it silently",
        _ => return None,
    };
    Some(text.to_string())
}
