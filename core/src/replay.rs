//! A graph captured once and run again with nothing recorded (torch.compile's graphs), in
//! tensors: the face of `exec::replay` for front ends.

use crate::error::Result;
use crate::exec;
use crate::location::SourceLocation;
use crate::tensor::Tensor;

/// A captured graph: see `exec::replay`.
pub struct Replay(exec::Replay);

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
            Replay(replay),
            data.into_iter().map(|d| Tensor::from_data(d, location.clone())).collect(),
        ))
    }

    /// Runs the captured graph on `arguments` (shaped as at the capture; pending ones are
    /// computed first), at `location`: the outputs' values, in the capture's order. None, with
    /// nothing run, when the arguments are split over a mesh otherwise than at the capture
    /// (capture the graph again for them).
    pub fn run(
        &self,
        arguments: &[&Tensor],
        location: SourceLocation,
    ) -> Result<Option<Vec<Tensor>>> {
        let a: Vec<_> = arguments.iter().map(|t| &t.0.value).collect();
        let Some(data) = self.0.run(&a, location.clone())? else { return Ok(None) };
        Ok(Some(data.into_iter().map(|d| Tensor::from_data(d, location.clone())).collect()))
    }

    /// The captured graph's structural key (its compiled-graph cache key).
    pub fn key(&self) -> u64 {
        self.0.key()
    }
}
