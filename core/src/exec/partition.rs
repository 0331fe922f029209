//! Which mesh a graph runs on, and the sharding each of its outputs gets.
//!
//! A graph is partitioned when one of its inputs is sharded or one of its nodes is a sharding
//! constraint; then XLA's partitioner (Shardy) splits it over that mesh's devices. Inputs and
//! constraints say how their values are split; everything in between is XLA's to decide. The
//! outputs are annotated here, by a small forward rule (elementwise ops take their first
//! operand's split, broadcasts, transposes, reductions and dot products keep their operands'),
//! because the outputs become the next
//! step's inputs: deciding them here keeps a tensor's sharding the same from step to step (a
//! changing one would recompile), makes it predictable (a parameter updated by an optimizer keeps
//! its parameter's split), and PJRT's C API has no call that reports the shardings XLA chose.

use std::sync::Arc;

use crate::error::Result;
use crate::ir::{Graph, Op};
use crate::spmd::{Mesh, Sharding};
use crate::Error;

/// How a partitioned graph runs.
#[derive(Debug, Clone)]
pub(crate) struct Partitioning {
    pub mesh: Arc<Mesh>,
    /// The sharding of each of the graph's outputs.
    pub outputs: Vec<Arc<Sharding>>,
}

/// The partitioning of a laid-out graph; None when nothing in it is sharded.
pub(crate) fn plan(graph: &Graph) -> Result<Option<Partitioning>> {
    let mut mesh: Option<Arc<Mesh>> = None;
    for node in &graph.order {
        // Replicated data does not make a program partitioned (it is structurally unsharded).
        let s = match &node.op {
            Op::Data(data) => data.sharding().filter(|s| !s.is_replicated()),
            Op::Shard(s) => Some(s),
            _ => None,
        };
        let Some(s) = s else { continue };
        match &mesh {
            None => mesh = Some(s.mesh.clone()),
            Some(m) if **m == *s.mesh => {}
            Some(m) => {
                return Err(Error::Sharding {
                    location: Some(node.location.clone()),
                    message: format!(
                        "one program uses two meshes, {m} and {}: one mesh per program",
                        s.mesh
                    ),
                })
            }
        }
    }
    let Some(mesh) = mesh else { return Ok(None) };
    // The split of each node along each of its dims, forward through the graph: None where the
    // rule does not know. Unsharded data and host scalars are known to be whole, so an update
    // `w - lr * g` keeps `w`'s split (whole stays whole) whatever the gradient's.
    let mut split: Vec<Option<Vec<Vec<usize>>>> = Vec::with_capacity(graph.order.len());
    for node in &graph.order {
        let input = |i: usize| -> Option<&Vec<Vec<usize>>> {
            let at = node.inputs.get(i)?.visit_index() as usize;
            split.get(at)?.as_ref()
        };
        let rank = node.shape.dims.len();
        let whole = || Some(vec![Vec::new(); rank]);
        let dims = match &node.op {
            Op::Data(data) => match data.sharding() {
                Some(s) if *s.mesh == *mesh => Some(s.dims.clone()),
                _ => whole(),
            },
            Op::Scalar(_) => whole(),
            Op::Shard(s) => (*s.mesh == *mesh).then(|| s.dims.clone()),
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Convert => {
                (0..node.inputs.len()).find_map(input).cloned()
            }
            Op::Reshape => input(0).filter(|d| d.iter().all(Vec::is_empty)).and_then(|_| whole()),
            Op::Transpose { perm } => {
                input(0).map(|d| perm.iter().map(|&p| d[p].clone()).collect())
            }
            Op::Broadcast { dims } => input(0).map(|d| {
                let mut out = vec![Vec::new(); rank];
                for (i, &to) in dims.iter().enumerate() {
                    if node.inputs[0].shape.dims[i] == node.shape.dims[to] {
                        out[to] = d[i].clone();
                    }
                }
                out
            }),
            Op::Reduce { axes, .. } => input(0).map(|d| {
                d.iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, a)| a.clone())
                    .collect()
            }),
            // Batch dims, then the free dims of each side keep their split; the contracted dims'
            // split becomes a sum across devices (XLA's all-reduce), not a split.
            Op::DotGeneral { lhs_batch, rhs_batch, lhs_contract, rhs_contract } => {
                let (l, r) = (input(0), input(1));
                (l.is_some() || r.is_some()).then(|| {
                    let free = |rank: usize, batch: &[usize], contract: &[usize]| {
                        (0..rank).filter(|d| !batch.contains(d) && !contract.contains(d)).collect()
                    };
                    let lhs_free: Vec<usize> =
                        free(node.inputs[0].shape.dims.len(), lhs_batch, lhs_contract);
                    let rhs_free: Vec<usize> =
                        free(node.inputs[1].shape.dims.len(), rhs_batch, rhs_contract);
                    let pick = |side: Option<&Vec<Vec<usize>>>, d: usize| {
                        side.map(|s| s[d].clone()).unwrap_or_default()
                    };
                    let mut out: Vec<Vec<usize>> = Vec::new();
                    for (&lb, &rb) in lhs_batch.iter().zip(rhs_batch) {
                        let a = pick(l, lb);
                        out.push(if a.is_empty() { pick(r, rb) } else { a });
                    }
                    out.extend(lhs_free.iter().map(|&d| pick(l, d)));
                    out.extend(rhs_free.iter().map(|&d| pick(r, d)));
                    out
                })
            }
            _ => None,
        };
        // Each node's split is a valid sharding of its shape (an axis splits one dim).
        split.push(dims.map(|d| valid(&mesh, d, &node.shape.dims).dims));
    }
    let outputs = graph
        .outputs
        .iter()
        .map(|&o| {
            let node = graph.order[o as usize];
            let dims = split[o as usize].clone().unwrap_or_default();
            Arc::new(valid(&mesh, dims, &node.shape.dims))
        })
        .collect();
    Ok(Some(Partitioning { mesh, outputs }))
}

/// `dims` made a sharding of an array of `shape`: an axis used twice keeps its first use, and a
/// dimension its axes do not divide is left whole.
fn valid(mesh: &Arc<Mesh>, mut dims: Vec<Vec<usize>>, shape: &[i64]) -> Sharding {
    dims.resize(shape.len(), Vec::new());
    let mut used = Vec::new();
    for (d, axes) in dims.iter_mut().enumerate() {
        axes.retain(|a| {
            let fresh = !used.contains(a);
            used.push(*a);
            fresh
        });
        let ways = mesh.ways(axes);
        if shape[d] % ways as i64 != 0 {
            axes.clear();
        }
    }
    Sharding { mesh: mesh.clone(), dims }
}
