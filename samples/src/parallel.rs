//! Training on several devices, as the samples' `--data-parallel N` and `--fsdp` ask: the batch
//! split over a 1-d mesh named `data` (XLA adds the gradients' all-reduce), and with `--fsdp` each
//! parameter split along its first dimension too (where the devices divide it).

use std::sync::Arc;

use xlaprof_core::spmd::Mesh;
use xlaprof_core::{Result, Tensor};

pub struct Parallel {
    mesh: Arc<Mesh>,
    fsdp: bool,
}

impl Parallel {
    /// From `--data-parallel N` (and `--fsdp`) among `args`; None when absent. Must run before
    /// the first tensor: the engine starts with the N devices the mesh needs.
    pub fn from_args(args: &[String]) -> Result<Option<Parallel>> {
        let Some(at) = args.iter().position(|a| a == "--data-parallel") else {
            return Ok(None);
        };
        let given = args.get(at + 1).map_or("nothing", String::as_str);
        let devices: usize = match given.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(xlaprof_core::Error::Sharding {
                    location: None,
                    message: format!("--data-parallel takes a device count, not {given:?}"),
                });
            }
        };
        xlaprof_core::engine_with_devices(devices)?;
        let mesh = Mesh::one_dimensional("data", devices)?;
        let fsdp = args.iter().any(|a| a == "--fsdp");
        Ok(Some(Parallel { mesh: Arc::new(mesh), fsdp }))
    }

    pub fn describe(&self) -> String {
        let how = if self.fsdp { "batch and parameters (FSDP)" } else { "batch (data parallel)" };
        format!("{} devices, {how} split over {}", self.mesh.size(), self.mesh)
    }

    /// Splits each tensor's first dimension (the batch) over the devices.
    pub fn shard_batch(&self, batch: &[&Tensor]) -> Result<()> {
        for t in batch {
            t.mark_sharding(&self.mesh, &self.first_dim(t.rank()))?;
        }
        Ok(())
    }

    /// With `--fsdp`, splits each parameter's first dimension where the devices divide it; the
    /// rest stay whole on every device.
    pub fn shard_parameters(&self, params: &[Tensor]) -> Result<()> {
        if !self.fsdp {
            return Ok(());
        }
        for p in params {
            if p.rank() > 0 && p.dims()[0] % self.mesh.size() as i64 == 0 {
                p.mark_sharding(&self.mesh, &self.first_dim(p.rank()))?;
            }
        }
        Ok(())
    }

    fn first_dim(&self, rank: usize) -> Vec<Vec<String>> {
        let mut spec = vec![Vec::new(); rank];
        if rank > 0 {
            spec[0] = vec!["data".to_string()];
        }
        spec
    }
}
