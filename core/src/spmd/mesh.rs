//! A logical mesh of devices: `shape` devices arranged along named axes (PyTorch/XLA's
//! `xs.Mesh(device_ids, mesh_shape, axis_names)`).

use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::Error;

/// Devices (indices into the engine's devices) laid out row-major over named axes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mesh {
    device_ids: Vec<usize>,
    shape: Vec<usize>,
    axis_names: Vec<String>,
    /// The devices sorted: partition `p` runs on `partitions[p]` (see [`Mesh::partitions`]).
    partitions: Vec<usize>,
}

impl Mesh {
    /// Checks that `shape` holds exactly `device_ids`, each of them once and below
    /// `device_count`, and that the axis names are distinct, one per axis.
    pub fn new(
        device_ids: Vec<usize>,
        shape: Vec<usize>,
        axis_names: Vec<String>,
        device_count: usize,
    ) -> Result<Mesh> {
        let bad = |message: String| Err(Error::Sharding { message, location: None });
        if shape.len() != axis_names.len() {
            return bad(format!(
                "a mesh of shape {shape:?} needs {} axis names, not {} ({axis_names:?})",
                shape.len(),
                axis_names.len()
            ));
        }
        let size: usize = shape.iter().product();
        if size != device_ids.len() || shape.contains(&0) {
            return bad(format!(
                "a mesh of shape {shape:?} holds {size} devices, but {} were given",
                device_ids.len()
            ));
        }
        for (i, id) in device_ids.iter().enumerate() {
            if *id >= device_count {
                return bad(format!(
                    "device {id} does not exist: there are {device_count} devices \
                     (0..{device_count}); on the CPU plugin, XLAPROF_CPU_DEVICES sets how many, \
                     before the program starts"
                ));
            }
            if device_ids[..i].contains(id) {
                return bad(format!("device {id} appears twice in {device_ids:?}"));
            }
        }
        for (i, name) in axis_names.iter().enumerate() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return bad(format!("axis name {name:?} must be letters, digits and _"));
            }
            if axis_names[..i].contains(name) {
                return bad(format!("axis name {name:?} appears twice in {axis_names:?}"));
            }
        }
        let mut partitions = device_ids.clone();
        partitions.sort_unstable();
        Ok(Mesh { device_ids, shape, axis_names, partitions })
    }

    /// Devices `0..device_count` in a 1-d mesh with one axis (PyTorch/XLA's `get_1d_mesh`).
    pub fn one_dimensional(axis: &str, device_count: usize) -> Result<Mesh> {
        Mesh::new((0..device_count).collect(), vec![device_count], vec![axis.into()], device_count)
    }

    pub fn device_ids(&self) -> &[usize] {
        &self.device_ids
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn axis_names(&self) -> &[String] {
        &self.axis_names
    }

    pub fn size(&self) -> usize {
        self.device_ids.len()
    }

    /// The index of axis `name`.
    pub fn axis(&self, name: &str) -> Option<usize> {
        self.axis_names.iter().position(|n| n == name)
    }

    /// The devices the program's partitions run on: partition `p` on `partitions()[p]`. Sorted,
    /// so that meshes over the same devices in another arrangement share partition numbers.
    pub fn partitions(&self) -> &[usize] {
        &self.partitions
    }

    /// How many ways splitting along `axes` (mesh axis indices) cuts a dimension.
    pub fn ways(&self, axes: &[usize]) -> usize {
        axes.iter().map(|&a| self.shape[a]).product()
    }

    /// The mesh coordinates of the device running partition `partition`.
    pub fn coords_of_partition(&self, partition: usize) -> Vec<usize> {
        let device = self.partitions()[partition];
        let mut flat = self.device_ids.iter().position(|&d| d == device).unwrap_or(0);
        let mut coords = vec![0; self.shape.len()];
        for (axis, &n) in self.shape.iter().enumerate().rev() {
            coords[axis] = flat % n;
            flat /= n;
        }
        coords
    }

    /// Shardy's declaration of this mesh, `sdy.mesh @mesh = <["data"=4]>`; the device list is
    /// spelled out (as partition numbers) only when it is not 0, 1, 2, ... in mesh order.
    pub fn sdy(&self) -> String {
        let axes: Vec<String> =
            self.axis_names.iter().zip(&self.shape).map(|(a, n)| format!("\"{a}\"={n}")).collect();
        let partitions = self.partitions();
        let logical: Vec<usize> = self
            .device_ids
            .iter()
            .map(|d| partitions.iter().position(|p| p == d).unwrap_or(0))
            .collect();
        let iota = logical.iter().enumerate().all(|(i, &l)| i == l);
        if iota {
            format!("sdy.mesh @mesh = <[{}]>", axes.join(", "))
        } else {
            let ids: Vec<String> = logical.iter().map(|l| l.to_string()).collect();
            format!("sdy.mesh @mesh = <[{}], device_ids=[{}]>", axes.join(", "), ids.join(", "))
        }
    }
}

impl std::fmt::Display for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let axes: Vec<String> =
            self.axis_names.iter().zip(&self.shape).map(|(a, n)| format!("{a}={n}")).collect();
        write!(f, "Mesh({}, devices {:?})", axes.join(", "), self.device_ids)
    }
}

static GLOBAL: Mutex<Option<Arc<Mesh>>> = Mutex::new(None);

/// Makes `mesh` the one `mark_sharding` uses when given none (PyTorch/XLA's `set_global_mesh`).
pub fn set_global_mesh(mesh: Option<Arc<Mesh>>) {
    *GLOBAL.lock().unwrap_or_else(|p| p.into_inner()) = mesh;
}

pub fn global_mesh() -> Option<Arc<Mesh>> {
    GLOBAL.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mesh_checks_its_devices_and_names() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(Mesh::new(vec![0, 1, 2, 3], vec![2, 2], names(&["a", "b"]), 4).is_ok());
        let err = Mesh::new(vec![0, 1, 2], vec![2, 2], names(&["a", "b"]), 4).unwrap_err();
        assert!(err.to_string().contains("holds 4 devices, but 3"), "{err}");
        let err = Mesh::new(vec![0, 1, 2, 7], vec![4], names(&["a"]), 4).unwrap_err();
        assert!(err.to_string().contains("device 7 does not exist"), "{err}");
        let err = Mesh::new(vec![0, 0], vec![2], names(&["a"]), 4).unwrap_err();
        assert!(err.to_string().contains("appears twice"), "{err}");
        let err = Mesh::new(vec![0, 1], vec![2], names(&["a", "b"]), 4).unwrap_err();
        assert!(err.to_string().contains("needs 1 axis names"), "{err}");
    }

    #[test]
    fn partitions_are_sorted_devices_and_shardy_names_a_permutation() {
        let m = Mesh::new(vec![2, 3, 0, 1], vec![2, 2], vec!["a".into(), "b".into()], 4).unwrap();
        assert_eq!(m.partitions(), vec![0, 1, 2, 3]);
        // Partition 0 runs on device 0, which sits at mesh position 2: coordinates (1, 0).
        assert_eq!(m.coords_of_partition(0), vec![1, 0]);
        assert_eq!(m.sdy(), "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2], device_ids=[2, 3, 0, 1]>");
        let plain = Mesh::one_dimensional("data", 4).unwrap();
        assert_eq!(plain.sdy(), "sdy.mesh @mesh = <[\"data\"=4]>");
    }
}
