//! Device data: the value of a materialized tensor. One buffer on the engine's device, or, for an
//! array sharded over a mesh, one buffer per partition of the mesh.

use std::sync::{Arc, Mutex, OnceLock};

use smallvec::SmallVec;

use crate::dtype::{DType, NativeType};
use crate::error::Result;
use crate::runtime::{typed_from_bytes, Buffer, Client};
use crate::spmd::{Mesh, Sharding};
use crate::Error;

pub struct DeviceData {
    /// In partition order of the sharding's mesh; one buffer when there is no sharding.
    shards: SmallVec<[Buffer; 1]>,
    sharding: Option<Arc<Sharding>>,
    /// Copies of a whole array on each partition of the meshes it was used with (made once).
    replicas: Mutex<Vec<(Arc<Mesh>, Arc<Vec<Buffer>>)>>,
    /// A copy of a replicated array on the engine's device, when its mesh lacks it.
    elsewhere: OnceLock<Buffer>,
    /// What the user calls the tensor this data is the value of (a parameter's name): how
    /// findings name a graph input. The first name given is kept.
    name: OnceLock<Arc<str>>,
}

impl DeviceData {
    /// An array on one device.
    pub fn single(buffer: Buffer) -> DeviceData {
        let mut shards = SmallVec::new();
        shards.push(buffer);
        DeviceData {
            shards,
            sharding: None,
            replicas: Mutex::default(),
            elsewhere: OnceLock::new(),
            name: OnceLock::new(),
        }
    }

    /// An array split as `sharding` says, its shards (at least one) in partition order.
    pub fn sharded(shards: Vec<Buffer>, sharding: Arc<Sharding>) -> Self {
        DeviceData {
            shards: shards.into(),
            sharding: Some(sharding),
            replicas: Mutex::default(),
            elsewhere: OnceLock::new(),
            name: OnceLock::new(),
        }
    }

    pub fn dtype(&self) -> DType {
        self.shards[0].dtype()
    }

    pub fn name(&self) -> Option<&Arc<str>> {
        self.name.get()
    }

    /// Names the data (kept when it already has a name).
    pub fn set_name(&self, name: Arc<str>) {
        let _ = self.name.set(name);
    }

    /// The whole array's dims (a split array's shards are smaller).
    pub fn dims(&self) -> Vec<i64> {
        match &self.sharding {
            Some(s) => s.whole_dims(self.shards[0].dims()),
            None => self.shards[0].dims().to_vec(),
        }
    }

    pub fn sharding(&self) -> Option<&Arc<Sharding>> {
        self.sharding.as_ref()
    }

    pub fn shards(&self) -> &[Buffer] {
        &self.shards
    }

    /// The whole array's size.
    pub fn size_bytes(&self) -> usize {
        // A shard times how many distinct shards there are (shards repeat along unused axes).
        let pieces: usize = match &self.sharding {
            Some(s) => s.dims.iter().map(|axes| s.mesh.ways(axes)).product(),
            None => 1,
        };
        self.shards[0].size_bytes() * pieces
    }

    /// The buffer a one-device program reads: the array itself, or the first copy of a
    /// replicated one. None for a split array.
    pub fn whole(&self) -> Option<&Buffer> {
        match &self.sharding {
            Some(s) if !s.is_replicated() => None,
            _ => self.shards.first(),
        }
    }

    /// The whole array on `device` (the engine's), for a one-device program: the array itself
    /// (unsharded arrays live there), the copy a replicated one has there, or a copy made once.
    pub fn on_device(&self, client: &Client, device: usize) -> Result<&Buffer> {
        let Some(sharding) = &self.sharding else { return Ok(&self.shards[0]) };
        if !sharding.is_replicated() {
            return Err(Error::Sharding {
                location: None,
                message: format!("a tensor sharded {sharding} reached a one-device program"),
            });
        }
        if let Some(p) = sharding.mesh.partitions().iter().position(|&d| d == device) {
            return Ok(&self.shards[p]);
        }
        if self.elsewhere.get().is_none() {
            let _ = self.elsewhere.set(self.shards[0].copy_to_device(client, device)?);
        }
        self.elsewhere.get().ok_or_else(|| Error::Sharding {
            location: None,
            message: format!("a tensor replicated over {} could not be copied", sharding.mesh),
        })
    }

    /// The buffers partition 0, 1, ... of a program over `mesh` reads: the shards when the array
    /// is sharded over `mesh`, else copies of the whole array on each partition's device (made
    /// once per mesh and kept).
    pub fn on_mesh(&self, client: &Client, mesh: &Arc<Mesh>) -> Result<OnMesh<'_>> {
        if let Some(s) = &self.sharding {
            if *s.mesh == **mesh {
                return Ok(OnMesh::Shards(&self.shards));
            }
        }
        let Some(whole) = self.whole() else {
            let s = self.sharding.as_ref().map(|s| s.to_string()).unwrap_or_default();
            return Err(Error::Sharding {
                location: None,
                message: format!(
                    "a tensor sharded {s} is used in a program over {mesh}: mark it with a sharding \
                     on that mesh first"
                ),
            });
        };
        let mut replicas = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, copies)) = replicas.iter().find(|(m, _)| **m == **mesh) {
            return Ok(OnMesh::Copies(copies.clone()));
        }
        let copies = mesh
            .partitions()
            .iter()
            .map(|&device| whole.copy_to_device(client, device))
            .collect::<Result<Vec<_>>>()?;
        let copies = Arc::new(copies);
        replicas.push((mesh.clone(), copies.clone()));
        Ok(OnMesh::Copies(copies))
    }

    /// The whole array as dense row-major bytes; a split array's shards are gathered on the host.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        if let Some(whole) = self.whole() {
            return whole.to_bytes();
        }
        let sharding = self.sharding.as_ref().expect("a split array has a sharding");
        let shards = self.shards.iter().map(|b| b.to_bytes()).collect::<Result<Vec<_>>>()?;
        Ok(sharding.assemble(&shards, self.dtype().size_bytes(), &self.dims()))
    }

    /// The whole array as `T`, which must be its dtype.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        if let Some(whole) = self.whole() {
            return whole.to_vec();
        }
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch { actual: self.dtype(), requested: T::DTYPE });
        }
        Ok(typed_from_bytes(&self.to_bytes()?))
    }
}

/// An array's buffers for each partition of a mesh: its own shards, or copies of it.
pub enum OnMesh<'a> {
    Shards(&'a [Buffer]),
    Copies(Arc<Vec<Buffer>>),
}

impl OnMesh<'_> {
    /// Partition `p`'s buffer.
    pub fn get(&self, p: usize) -> &Buffer {
        match self {
            OnMesh::Shards(shards) => &shards[p],
            OnMesh::Copies(copies) => &copies[p],
        }
    }
}

impl std::fmt::Debug for DeviceData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shape = crate::dtype::shape_string(self.dtype(), &self.dims());
        match &self.sharding {
            Some(s) => write!(f, "DeviceData({shape}, sharded {s})"),
            None => write!(f, "DeviceData({shape})"),
        }
    }
}
