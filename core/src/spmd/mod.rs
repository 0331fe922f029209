//! Many devices: a mesh names the devices and their axes, a sharding says how each dimension of
//! an array is split over the mesh's axes. XLA's SPMD partitioner (Shardy) does the splitting of
//! the program; this module does the arithmetic of where each shard of host data goes.

mod mesh;
mod sharding;

pub use mesh::{global_mesh, set_global_mesh, Mesh};
pub use sharding::Sharding;
