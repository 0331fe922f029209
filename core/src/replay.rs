//! A graph captured once and run again with no front end in the loop (torch.compile's graphs),
//! in tensors, one of two ways: launched on its own at each run (`exec::replay`), or recorded
//! into the lazy trace at each run (`trace::template`), where the next sync computes it with
//! the rest of the step, as one program.

use crate::error::Result;
use crate::events::{bump, counter, SyncCause};
use crate::exec;
use crate::location::SourceLocation;
use crate::tensor::{Tensor, TensorInner};
use crate::trace::{self, Template, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// A captured graph: see the module's comment.
pub struct Replay(Kind);

enum Kind {
    Launched(exec::Replay),
    Recorded(Recorded),
}

struct Recorded {
    template: Template,
    /// `exec::FULL_SYNCS` after this graph's last run: while it is unchanged, that run's
    /// results are still pending.
    ran_before: AtomicU64,
}

impl Recorded {
    /// Records the graph over `arguments` into the lazy trace: its outputs, pending.
    fn run(&self, arguments: &[&Value], location: SourceLocation) -> Result<Vec<Tensor>> {
        // Called again before its last results were computed: a step has ended (a loop that
        // never reads a value, or an optimizer's step that is not compiled). Its program runs
        // now, or the trace would grow by a step at every call.
        if self.ran_before.load(Ordering::Relaxed) == exec::FULL_SYNCS.load(Ordering::Relaxed) {
            exec::sync_all(SyncCause::CompiledGraph, location)?;
        }
        bump(&counter::ops_traced, self.template.len() as u64);
        let tensors =
            trace::record_template(&self.template, arguments, |node| TensorInner::new(node, None));
        self.ran_before.store(exec::FULL_SYNCS.load(Ordering::Relaxed), Ordering::Relaxed);
        exec::REPLAYED.store(true, Ordering::Relaxed);
        Ok(tensors.into_iter().map(Tensor).collect())
    }
}

/// Computes the pending tensors among `tensors` (a sync the profile reports as a compiled
/// graph's): a capture records on device data, and each run takes device data.
pub fn materialize(tensors: &[&Tensor], location: &SourceLocation) -> Result<()> {
    let values: Vec<_> = tensors.iter().map(|t| &t.0.value).collect();
    exec::materialize(&values, location)
}

impl Replay {
    /// Captures the graph that computes `outputs` from `arguments` (device data: see
    /// [`materialize`]) and runs it once: the replay and the outputs' values.
    pub fn capture(
        arguments: &[&Tensor],
        outputs: &[&Tensor],
        location: SourceLocation,
    ) -> Result<(Replay, Vec<Tensor>)> {
        let a: Vec<_> = arguments.iter().map(|t| &t.0.value).collect();
        let o: Vec<_> = outputs.iter().map(|t| &t.0.value).collect();
        let (replay, data) = exec::Replay::capture(&a, &o, location.clone())?;
        Ok((
            Replay(Kind::Launched(replay)),
            data.into_iter().map(|d| Tensor::from_data(d, location.clone())).collect(),
        ))
    }

    /// Keeps the graph that computes `outputs` (pending) from `arguments` (device data: see
    /// [`materialize`]) to record it into the lazy trace at each run, and records it once now:
    /// the replay and this run's outputs, pending. None where it cannot be: an argument that is
    /// not device data, or one split over a mesh (a program of its own per split:
    /// [`Replay::capture`]).
    ///
    /// This first run's outputs are new tensors made as every later run makes them, not the
    /// front end's recording: a sync orders the tensors it computes by when they were made, and
    /// the step that captures a graph and the steps that replay it must give the same program.
    pub fn recorded(
        arguments: &[&Tensor],
        outputs: &[&Tensor],
        location: SourceLocation,
    ) -> Result<Option<(Replay, Vec<Tensor>)>> {
        if arguments.iter().any(|a| a.sharding().is_some_and(|s| !s.is_replicated())) {
            return Ok(None);
        }
        let a: Vec<_> = arguments.iter().map(|t| &t.0.value).collect();
        let o: Vec<_> = outputs.iter().map(|t| &t.0.value).collect();
        let Some(template) = Template::new(&a, &o) else { return Ok(None) };
        // The next sync is not this graph's to wait for.
        let ran_before = AtomicU64::new(exec::FULL_SYNCS.load(Ordering::Relaxed).wrapping_sub(1));
        let recorded = Recorded { template, ran_before };
        let outputs = recorded.run(&a, location)?;
        Ok(Some((Replay(Kind::Recorded(recorded)), outputs)))
    }

    /// Runs the captured graph on `arguments` (shaped as at the capture; pending ones are
    /// computed first), at `location`: the outputs' values, in the capture's order. None, with
    /// nothing run, when the arguments are split over a mesh otherwise than at the capture
    /// (capture the graph again for them).
    ///
    /// `handed_over`: the arguments (by position) the caller gives up: it rebinds each such
    /// tensor to the output that takes its place (an in-place update's, see
    /// [`Tensor::take_place_of`]) and holds its old value nowhere else. The program then takes
    /// that argument's buffer for the output, where nothing else refers to it, as a sync donates
    /// an updated parameter's; after the run the old tensor must not be read.
    pub fn run(
        &self,
        arguments: &[&Tensor],
        handed_over: &[usize],
        location: SourceLocation,
    ) -> Result<Option<Vec<Tensor>>> {
        let a: Vec<_> = arguments.iter().map(|t| &t.0.value).collect();
        match &self.0 {
            Kind::Launched(replay) => {
                let Some(data) = replay.run(&a, handed_over, location.clone())? else {
                    return Ok(None);
                };
                Ok(Some(data.into_iter().map(|d| Tensor::from_data(d, location.clone())).collect()))
            }
            Kind::Recorded(recorded) => recorded.run(&a, location).map(Some),
        }
    }

    /// The captured graph's structural key (its compiled-graph cache key); 0 for one recorded
    /// into the trace, which is part of a larger program.
    pub fn key(&self) -> u64 {
        match &self.0 {
            Kind::Launched(replay) => replay.key(),
            Kind::Recorded(_) => 0,
        }
    }
}
