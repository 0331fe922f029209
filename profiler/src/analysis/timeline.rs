//! The profile as spans on a timeline: steps, syncs and their phases, scopes, transfers, host
//! reads, and the host's own work (CPU fallbacks, waits for data). The Chrome trace, the flamegraph, the tables and the viewers all draw these.

use serde::Serialize;

use crate::profile::Profile;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum SpanKind {
    Step,
    Scope,
    Sync,
    GraphBuild,
    Lower,
    Compile,
    Execute,
    TransferToDevice,
    HostRead,
    /// One device's part of a partitioned execution: from the launch to when that device
    /// finished, on the device's own lane.
    Device,
    /// A function compiled by a front end's compiler (torch.compile), with its phases inside.
    FunctionCompile,
    CompilePhase,
    /// A run of a graph a front end's compiler captured.
    CapturedRun,
    /// An op run on the host for want of a lowering.
    HostFallback,
    /// The program waiting for its input pipeline's next batch.
    DataWait,
    /// A collective with the job's other processes (torch.distributed's), from entering it to
    /// leaving it: mostly waiting for the others.
    Collective,
}

impl SpanKind {
    pub fn name(self) -> &'static str {
        match self {
            SpanKind::Step => "step",
            SpanKind::Scope => "scope",
            SpanKind::Sync => "sync",
            SpanKind::GraphBuild => "graph build",
            SpanKind::Lower => "lower",
            SpanKind::Compile => "compile",
            SpanKind::Execute => "execute",
            SpanKind::TransferToDevice => "transfer to device",
            SpanKind::HostRead => "host read",
            SpanKind::Device => "device",
            SpanKind::FunctionCompile => "torch.compile",
            SpanKind::CompilePhase => "compile phase",
            SpanKind::CapturedRun => "compiled graph",
            SpanKind::HostFallback => "CPU fallback",
            SpanKind::DataWait => "waiting for data",
            SpanKind::Collective => "collective",
        }
    }

    /// The lane (track) a span of this kind is drawn on: steps, program scopes, syncs and
    /// phases, transfers; a device span's lane is its device's ([`Span::lane`]).
    pub fn lane(self) -> u32 {
        match self {
            SpanKind::Device => LANES.len() as u32,
            SpanKind::Step => 0,
            SpanKind::Scope => 1,
            SpanKind::Sync
            | SpanKind::GraphBuild
            | SpanKind::Lower
            | SpanKind::Compile
            | SpanKind::Execute
            | SpanKind::FunctionCompile
            | SpanKind::CompilePhase
            | SpanKind::CapturedRun => 2,
            SpanKind::TransferToDevice | SpanKind::HostRead => 3,
            SpanKind::HostFallback | SpanKind::DataWait | SpanKind::Collective => 4,
        }
    }
}

pub const LANES: [&str; 5] = ["steps", "scopes", "syncs", "transfers", "host"];

/// Devices with a lane of their own (after [`LANES`]): device `d` is lane `LANES.len() + d`. A
/// profile naming a device beyond this (a damaged one) draws no lane for it.
pub const MAX_DEVICE_LANES: u32 = 256;

/// The name of lane `lane`: one of [`LANES`] or `device N`.
pub fn lane_name(lane: u32) -> String {
    match LANES.get(lane as usize) {
        Some(name) => name.to_string(),
        None if lane >= RANK_LANES => format!("rank {}", lane - RANK_LANES),
        None => format!("device {}", lane - LANES.len() as u32),
    }
}

/// A job's ranks, each a lane of its own after the devices': rank `r` is lane `RANK_LANES + r`
/// ([`crate::job::rank_lanes`]).
pub const RANK_LANES: u32 = LANES.len() as u32 + MAX_DEVICE_LANES;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    pub kind: SpanKind,
    /// The lane it is drawn on: its kind's, or its device's.
    pub lane: u32,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Nesting depth within the lane (phases are inside their sync; scopes nest).
    pub depth: u32,
    pub step: Option<u64>,
    pub sync: Option<u64>,
    pub hash: Option<u64>,
    pub location: Option<u32>,
    pub bytes: Option<u64>,
}

impl Span {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

pub(crate) fn span(kind: SpanKind, name: String, start_ns: u64, end_ns: u64, depth: u32) -> Span {
    Span {
        kind,
        lane: kind.lane(),
        name,
        start_ns,
        end_ns,
        depth,
        step: None,
        sync: None,
        hash: None,
        location: None,
        bytes: None,
    }
}

/// Every span of a profile, sorted by start time.
pub fn spans(p: &Profile) -> Vec<Span> {
    let mut out = Vec::new();
    for s in &p.steps {
        let mut sp = span(SpanKind::Step, format!("step {}", s.index), s.start_ns, s.end_ns, 0);
        sp.step = Some(s.index);
        sp.location = Some(s.location);
        out.push(sp);
    }
    for sc in &p.scopes {
        let mut sp = span(
            SpanKind::Scope,
            sc.name.clone(),
            sc.start_ns,
            sc.end_ns.unwrap_or(p.end_ns()),
            sc.depth,
        );
        sp.location = Some(sc.location);
        out.push(sp);
    }
    for s in &p.syncs {
        let graph = s.hash.map(|h| format!(" {h:016x}")).unwrap_or_default();
        let mut sp = span(
            SpanKind::Sync,
            format!("sync ({}){graph}", s.cause.describe()),
            s.start_ns,
            s.end_ns,
            0,
        );
        sp.step = Some(s.step);
        sp.sync = Some(s.id);
        sp.hash = s.hash;
        sp.location = Some(s.location);
        out.push(sp);
        // Building and lowering have no start times of their own: they open the sync.
        let mut at = s.start_ns;
        for (kind, ns) in [(SpanKind::GraphBuild, s.build_ns), (SpanKind::Lower, s.lower_ns)] {
            if ns > 0 {
                let end = at.saturating_add(ns);
                let mut phase = span(kind, kind.name().to_string(), at, end, 1);
                phase.step = Some(s.step);
                phase.sync = Some(s.id);
                phase.hash = s.hash;
                out.push(phase);
                at = end;
            }
        }
    }
    let step_of = |sync: u64| p.sync(sync).map(|s| s.step);
    // Compiles and executions: a graph's phase inside its sync.
    let graph_phases = p
        .compiles
        .iter()
        .map(|c| (SpanKind::Compile, c.sync, c.hash, c.start_ns, c.duration_ns))
        .chain(
            p.executions
                .iter()
                .map(|e| (SpanKind::Execute, e.sync, e.hash, e.start_ns, e.duration_ns)),
        );
    for (kind, sync, hash, start_ns, duration_ns) in graph_phases {
        let end_ns = start_ns.saturating_add(duration_ns);
        let mut sp = span(kind, format!("{} {hash:016x}", kind.name()), start_ns, end_ns, 1);
        sp.sync = Some(sync);
        sp.step = step_of(sync);
        sp.hash = Some(hash);
        out.push(sp);
    }
    for e in p.executions.iter().filter(|e| e.device_end_ns.len() > 1) {
        let plan = p.graphs.get(&e.hash).and_then(|g| g.partition.as_ref());
        for (partition, &end) in e.device_end_ns.iter().enumerate() {
            let device = plan.map_or(partition as u32, |pl| pl.device(partition));
            if device >= MAX_DEVICE_LANES {
                continue;
            }
            let name = format!("device {device}: {:016x}", e.hash);
            let mut sp = span(SpanKind::Device, name, e.start_ns, end.max(e.start_ns), 0);
            sp.lane = LANES.len() as u32 + device;
            sp.sync = Some(e.sync);
            sp.step = step_of(e.sync);
            sp.hash = Some(e.hash);
            out.push(sp);
        }
    }
    for t in p.transfers.iter().filter(|t| t.to_device) {
        let mut sp = span(
            SpanKind::TransferToDevice,
            "to device".to_string(),
            t.start_ns,
            t.start_ns.saturating_add(t.duration_ns),
            0,
        );
        sp.sync = (t.sync > 0).then_some(t.sync);
        sp.bytes = Some(t.bytes);
        out.push(sp);
    }
    for r in &p.value_reads {
        let mut sp = span(
            SpanKind::HostRead,
            format!("read {}", r.shape),
            r.start_ns,
            r.start_ns.saturating_add(r.duration_ns),
            0,
        );
        sp.step = Some(r.step);
        sp.location = Some(r.location);
        sp.bytes = Some(r.bytes);
        out.push(sp);
    }
    for f in &p.host_fallbacks {
        let end = f.start_ns.saturating_add(f.duration_ns);
        let mut sp = span(SpanKind::HostFallback, f.op.clone(), f.start_ns, end, 0);
        sp.step = Some(f.step);
        sp.location = Some(f.location);
        out.push(sp);
    }
    for w in &p.data_waits {
        let end = w.start_ns.saturating_add(w.duration_ns);
        let mut sp = span(SpanKind::DataWait, "waiting for data".to_string(), w.start_ns, end, 0);
        sp.step = Some(w.step);
        sp.location = Some(w.location);
        out.push(sp);
    }
    for c in &p.collectives {
        // One still inside (or stuck) reaches to the profile's end.
        let end = c.end_ns.unwrap_or_else(|| p.end_ns().max(c.start_ns));
        let label = format!("{} #{} ({})", c.op, c.seq, c.group);
        let mut sp = span(SpanKind::Collective, label, c.start_ns, end, 0);
        sp.step = Some(c.step);
        sp.location = Some(c.location);
        out.push(sp);
    }
    captured_spans(p, &mut out);
    out.sort_by(|a, b| {
        a.start_ns.cmp(&b.start_ns).then(a.lane.cmp(&b.lane)).then(a.depth.cmp(&b.depth))
    });
    out
}

/// What a front end's compiler did (torch.compile), on the syncs' lane: each compile with its
/// phases inside it (in order, from its start: the phases have no start times of their own),
/// and each run of a captured graph.
fn captured_spans(p: &Profile, out: &mut Vec<Span>) {
    for c in &p.function_compiles {
        let end = c.start_ns.saturating_add(c.duration_ns);
        let function = p.line(c.function);
        let mut sp = span(
            SpanKind::FunctionCompile,
            format!("torch.compile {} {function}", c.id),
            c.start_ns,
            end,
            0,
        );
        sp.step = Some(c.step);
        let hash = c.graphs.first().copied();
        sp.hash = hash;
        sp.location = Some(c.function);
        out.push(sp);
        let mut at = c.start_ns;
        for (name, ns) in c.phases.iter().filter(|(_, ns)| *ns > 0) {
            let phase_end = at.saturating_add(*ns).min(end);
            let mut phase = span(SpanKind::CompilePhase, name.clone(), at, phase_end, 1);
            phase.step = Some(c.step);
            phase.hash = hash;
            out.push(phase);
            at = phase_end;
        }
    }
    for r in &p.captured_runs {
        let mut sp = span(
            SpanKind::CapturedRun,
            format!("compiled graph {:016x}", r.hash),
            r.start_ns,
            r.start_ns.saturating_add(r.duration_ns),
            0,
        );
        sp.step = Some(r.step);
        sp.hash = Some(r.hash);
        sp.location = p.graphs.get(&r.hash).and_then(|g| g.function);
        out.push(sp);
    }
}

/// What a viewer draws of a window of the timeline: a span wide enough to see on its own, or
/// the spans of one lane and depth too narrow to see, merged over one pixel column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bar {
    pub lane: u32,
    pub depth: u32,
    pub kind: SpanKind,
    pub start_ns: u64,
    pub end_ns: u64,
    /// How many spans it stands for (1: the span itself, whose index in `spans` is `span`).
    pub count: u32,
    pub span: Option<usize>,
    /// Of merged spans, the time they cover together (at most the column's width).
    pub busy_ns: u64,
}

/// The bars a viewer `columns` pixels wide draws for the window `start_ns..end_ns` of `spans`
/// (sorted by start, as [`spans`] returns them): at most a few per column, lane and depth
/// whatever the number of spans, so a million-span profile draws as fast as a small one. Each
/// span at least a column wide is its own bar; narrower ones merge per column.
pub fn window(spans: &[Span], start_ns: u64, end_ns: u64, columns: u32) -> Vec<Bar> {
    let end_ns = end_ns.max(start_ns + 1);
    let columns = columns.clamp(1, 16_384) as u64;
    let column_ns = ((end_ns - start_ns) / columns).max(1);
    let mut out: Vec<Bar> = Vec::new();
    // The merged bar being built for each (lane, depth): spans come in start order, so a
    // lane's next narrow span either joins its column's bar or starts the next one.
    let mut open: std::collections::HashMap<(u32, u32), usize> = std::collections::HashMap::new();
    let last = spans.partition_point(|s| s.start_ns < end_ns);
    for (i, s) in spans[..last].iter().enumerate() {
        if s.end_ns < start_ns {
            continue;
        }
        let alone = |start_ns, end_ns| Bar {
            lane: s.lane,
            depth: s.depth,
            kind: s.kind,
            start_ns,
            end_ns,
            count: 1,
            span: Some(i),
            busy_ns: s.duration_ns(),
        };
        if s.duration_ns() >= column_ns {
            out.push(alone(s.start_ns, s.end_ns));
            continue;
        }
        let column = s.start_ns.max(start_ns).saturating_sub(start_ns) / column_ns;
        let column_start = start_ns + column * column_ns;
        let key = (s.lane, s.depth);
        match open.get(&key).map(|&b| &mut out[b]) {
            Some(bar) if bar.start_ns == column_start => {
                bar.count += 1;
                bar.span = None;
                bar.busy_ns = (bar.busy_ns + s.duration_ns()).min(column_ns);
                // The column's bar shows its costliest kind (a compile among executions).
                bar.kind = bar.kind.min(s.kind);
            }
            _ => {
                open.insert(key, out.len());
                out.push(alone(column_start, column_start + column_ns));
            }
        }
    }
    out
}

#[cfg(test)]
mod window_tests {
    use super::*;

    fn at(lane: u32, start_ns: u64, end_ns: u64) -> Span {
        let mut s = span(SpanKind::Execute, "execute".into(), start_ns, end_ns, 0);
        s.lane = lane;
        s
    }

    #[test]
    fn narrow_spans_merge_per_column_and_wide_ones_stay_whole() {
        // A million 10 ns executions over 20 ms, and one compile of 5 ms.
        let mut spans: Vec<Span> = (0..1_000_000u64).map(|i| at(2, i * 20, i * 20 + 10)).collect();
        spans.push(at(1, 1_000, 5_001_000));
        spans.sort_by_key(|s| s.start_ns);
        let bars = window(&spans, 0, 20_000_000, 1000);
        assert!(bars.len() <= 1001, "{}", bars.len());
        let whole: Vec<&Bar> = bars.iter().filter(|b| b.count == 1).collect();
        assert_eq!(whole.len(), 1);
        assert_eq!((whole[0].start_ns, whole[0].end_ns), (1_000, 5_001_000));
        let merged: u64 = bars.iter().filter(|b| b.lane == 2).map(|b| b.count as u64).sum();
        assert_eq!(merged, 1_000_000);
        // Zoomed in on 2 µs: each execution is its own bar again.
        let near = window(&spans, 10_000, 12_000, 1000);
        assert!(near.iter().filter(|b| b.lane == 2).all(|b| b.count == 1));
        assert_eq!(near.iter().filter(|b| b.lane == 2).count(), 100);
    }

    #[test]
    fn cpu_fallbacks_and_waits_for_data_are_on_the_host_lane() {
        use crate::profile::{DataWait, HostFallback};
        let mut p = Profile::default();
        let (op, location, step) = ("aten::_fft_c2c".to_string(), 0, 0);
        p.host_fallbacks.push(HostFallback { op, location, start_ns: 100, duration_ns: 50, step });
        p.data_waits.push(DataWait { location, start_ns: 300, duration_ns: 40, step });
        let host: Vec<Span> = spans(&p).into_iter().filter(|s| s.lane == 4).collect();
        assert_eq!(lane_name(4), "host");
        assert_eq!(host.len(), 2);
        assert_eq!(
            (host[0].kind, host[0].name.as_str()),
            (SpanKind::HostFallback, "aten::_fft_c2c")
        );
        assert_eq!((host[0].start_ns, host[0].end_ns), (100, 150));
        assert_eq!(
            (host[1].kind, host[1].start_ns, host[1].end_ns),
            (SpanKind::DataWait, 300, 340)
        );
    }
}
