//! Sharding annotations (PyTorch/XLA's `xs.mark_sharding`): how a tensor is split over a mesh.

use std::sync::Arc;

use crate::error::Result;
use crate::events::{self, Direction};
use crate::exec;
use crate::ir::{DeviceData, Op};
use crate::location::SourceLocation;
use crate::spmd::{Mesh, Sharding};
use crate::tensor::{note_transfer, Tensor};
use crate::Error;

impl Tensor {
    /// Splits this tensor over `mesh` as `spec` says: one entry per dimension, the mesh axes it is
    /// split over (none: whole along it). Device data is split now, its shards sent to the mesh's
    /// devices; a pending tensor gets a constraint that XLA's partitioner honours in the program
    /// that computes it. A spec that does not fit (an axis the mesh lacks, a dimension the axes do
    /// not divide) is an error at the caller's line, before anything compiles.
    #[track_caller]
    pub fn mark_sharding(&self, mesh: &Arc<Mesh>, spec: &[Vec<String>]) -> Result<()> {
        let location = SourceLocation::caller();
        let sharding = Sharding::new(mesh.clone(), spec, self.dims()).map_err(|e| match e {
            Error::Sharding { message, .. } => {
                Error::Sharding { message, location: Some(location.clone()) }
            }
            other => other,
        })?;
        self.shard_as(Arc::new(sharding), location)
    }

    /// Gives this tensor `sharding` (already checked against its dims).
    pub(crate) fn shard_as(&self, sharding: Arc<Sharding>, location: SourceLocation) -> Result<()> {
        if self.sharding().as_deref() == Some(&*sharding) {
            return Ok(());
        }
        let node = self.node();
        let sharded = match &node.op {
            Op::Data(data) => Tensor::from_data(Arc::new(split(data, sharding)?), location),
            _ => {
                let shape = self.shape().clone();
                Tensor::op(Op::Shard(sharding), shape, &[self], location, None)
            }
        };
        self.rebind(&sharded);
        Ok(())
    }

    /// Splits this tensor as `like` is split, when `like` is split over a mesh (state made for a
    /// parameter, such as an optimizer's moments, follows the parameter); nothing otherwise.
    #[track_caller]
    pub fn shard_like(&self, like: &Tensor) -> Result<()> {
        let location = SourceLocation::caller();
        match like.sharding().filter(|s| !s.is_replicated()) {
            Some(s) if self.dims() == like.dims() => self.shard_as(s, location),
            _ => Ok(()),
        }
    }

    /// How the tensor is split: its data's sharding, or the constraint it is pending on.
    pub fn sharding(&self) -> Option<Arc<Sharding>> {
        match &self.node().op {
            Op::Data(data) => data.sharding().cloned(),
            Op::Shard(s) => Some(s.clone()),
            _ => None,
        }
    }
}

/// `data` as `sharding` splits it: gathered on the host if it is split another way, cut into
/// shards and each sent to its partition's device.
fn split(data: &DeviceData, sharding: Arc<Sharding>) -> Result<DeviceData> {
    let engine = exec::engine()?;
    let start = events::now_ns();
    let bytes = data.to_bytes()?;
    let size = data.dtype().size_bytes();
    let dims = data.dims();
    let pieces = sharding.split(&bytes, size, &dims);
    let shard_dims = sharding.shard_dims(&dims);
    let devices = sharding.mesh.partitions();
    let mut shards = Vec::with_capacity(pieces.len());
    let mut sent = 0u64;
    for (piece, &device) in pieces.iter().zip(devices) {
        shards.push(engine.client.buffer_from_bytes(piece, data.dtype(), &shard_dims, device)?);
        sent += piece.len() as u64;
    }
    note_transfer(Direction::ToDevice, sent, start, None);
    Ok(DeviceData::sharded(shards, sharding))
}
