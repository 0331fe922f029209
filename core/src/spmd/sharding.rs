//! How an array is split over a mesh: for each dimension, the mesh axes it is split over
//! (PyTorch/XLA's partition spec `("data", None)`; an entry may name several axes, major first).

use std::sync::Arc;

use super::Mesh;
use crate::error::Result;
use crate::Error;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sharding {
    pub mesh: Arc<Mesh>,
    /// Per array dimension, the mesh axes (indices) it is split over; empty: not split.
    pub dims: Vec<Vec<usize>>,
}

impl Sharding {
    /// The sharding `spec` gives an array of `dims`: one entry per dimension, each the names of
    /// the axes that dimension is split over (none: replicated along it). An axis the mesh lacks,
    /// an axis used twice, or a dimension the axes do not divide is an error naming both.
    pub fn new(mesh: Arc<Mesh>, spec: &[Vec<String>], dims: &[i64]) -> Result<Sharding> {
        let bad = |message: String| Err(Error::Sharding { message, location: None });
        if spec.len() != dims.len() {
            return bad(format!(
                "the partition spec has {} entries but the tensor has {} dimensions {dims:?}",
                spec.len(),
                dims.len()
            ));
        }
        let mut used: Vec<usize> = Vec::new();
        let mut out = Vec::with_capacity(spec.len());
        for (d, names) in spec.iter().enumerate() {
            let mut axes = Vec::with_capacity(names.len());
            for name in names {
                let Some(axis) = mesh.axis(name) else {
                    return bad(format!(
                        "the mesh has no axis {name:?} (its axes are {:?})",
                        mesh.axis_names()
                    ));
                };
                if used.contains(&axis) {
                    return bad(format!("axis {name:?} shards two dimensions"));
                }
                used.push(axis);
                axes.push(axis);
            }
            let ways = mesh.ways(&axes);
            if dims[d] % ways as i64 != 0 {
                return bad(format!(
                    "dimension {d} of size {} cannot be split {ways} ways over {names:?} of {mesh}",
                    dims[d]
                ));
            }
            out.push(axes);
        }
        Ok(Sharding { mesh, dims: out })
    }

    pub fn is_replicated(&self) -> bool {
        self.dims.iter().all(|a| a.is_empty())
    }

    /// How many ways dimension `d` is split.
    fn ways(&self, d: usize) -> usize {
        self.mesh.ways(&self.dims[d])
    }

    /// The dims of one shard of an array of `global` dims.
    pub fn shard_dims(&self, global: &[i64]) -> Vec<i64> {
        global.iter().enumerate().map(|(d, &n)| n / self.ways(d) as i64).collect()
    }

    /// The whole array's dims from a shard's (the inverse of [`Sharding::shard_dims`]).
    pub fn whole_dims(&self, shard: &[i64]) -> Vec<i64> {
        shard.iter().enumerate().map(|(d, &n)| n * self.ways(d) as i64).collect()
    }

    /// Where partition `partition`'s shard starts in the whole array.
    pub fn shard_origin(&self, partition: usize, global: &[i64]) -> Vec<i64> {
        let coords = self.mesh.coords_of_partition(partition);
        let shard = self.shard_dims(global);
        (0..global.len())
            .map(|d| {
                let index = self.dims[d]
                    .iter()
                    .fold(0usize, |acc, &axis| acc * self.mesh.shape()[axis] + coords[axis]);
                index as i64 * shard[d]
            })
            .collect()
    }

    /// Splits dense row-major host bytes of an array of `global` dims into one shard per
    /// partition, in partition order.
    pub fn split(&self, bytes: &[u8], element_size: usize, global: &[i64]) -> Vec<Vec<u8>> {
        let shard = self.shard_dims(global);
        let len = shard.iter().product::<i64>() as usize * element_size;
        (0..self.mesh.size())
            .map(|p| {
                let mut out = vec![0u8; len];
                let origin = self.shard_origin(p, global);
                copy_block(global, &shard, &origin, element_size, |g, s, n| {
                    out[s..s + n].copy_from_slice(&bytes[g..g + n])
                });
                out
            })
            .collect()
    }

    /// The whole array's dense row-major bytes from the shards (in partition order).
    pub fn assemble(&self, shards: &[Vec<u8>], element_size: usize, global: &[i64]) -> Vec<u8> {
        let total = global.iter().map(|&n| n.max(0)).product::<i64>() as usize * element_size;
        let mut out = vec![0u8; total];
        let shard = self.shard_dims(global);
        for (p, bytes) in shards.iter().enumerate() {
            let origin = self.shard_origin(p, global);
            copy_block(global, &shard, &origin, element_size, |g, s, n| {
                out[g..g + n].copy_from_slice(&bytes[s..s + n])
            });
        }
        out
    }

    /// Shardy's form, `#sdy.sharding<@mesh, [{"data"}, {}]>`.
    pub fn sdy(&self) -> String {
        format!("#sdy.sharding{}", self.sdy_body())
    }

    /// Shardy's form without its attribute name, `<@mesh, [{"data"}, {}]>`, as a sharding
    /// constraint spells it.
    pub fn sdy_body(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|axes| {
                let names: Vec<String> =
                    axes.iter().map(|&a| format!("\"{}\"", self.mesh.axis_names()[a])).collect();
                format!("{{{}}}", names.join(", "))
            })
            .collect();
        format!("<@mesh, [{}]>", dims.join(", "))
    }

    /// PyTorch/XLA's spelling of the spec, `("data", None)`.
    pub fn spec(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|axes| match axes.as_slice() {
                [] => "None".to_string(),
                [a] => format!("'{}'", self.mesh.axis_names()[*a]),
                many => {
                    let names: Vec<String> =
                        many.iter().map(|&a| format!("'{}'", self.mesh.axis_names()[a])).collect();
                    format!("({})", names.join(", "))
                }
            })
            .collect();
        if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        }
    }
}

impl std::fmt::Display for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} over {}", self.spec(), self.mesh)
    }
}

/// Calls `copy(global_offset, shard_offset, bytes)` for each contiguous run of a block of `shard`
/// dims at `origin` inside an array of `global` dims (offsets in bytes).
fn copy_block(
    global: &[i64],
    shard: &[i64],
    origin: &[i64],
    element_size: usize,
    mut copy: impl FnMut(usize, usize, usize),
) {
    if shard.iter().any(|&n| n <= 0) {
        return;
    }
    let rank = global.len();
    if rank == 0 {
        copy(0, 0, element_size);
        return;
    }
    let run = shard[rank - 1] as usize * element_size;
    let mut index = vec![0i64; rank - 1];
    let mut shard_offset = 0;
    loop {
        let mut flat = 0i64;
        for d in 0..rank {
            let i = if d + 1 < rank { index[d] } else { 0 };
            flat = flat * global[d] + origin[d] + i;
        }
        copy(flat as usize * element_size, shard_offset, run);
        shard_offset += run;
        // Next row of the block, last leading dim fastest.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < shard[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh(shape: Vec<usize>, names: &[&str]) -> Arc<Mesh> {
        let n = shape.iter().product();
        let names = names.iter().map(|s| s.to_string()).collect();
        Arc::new(Mesh::new((0..n).collect(), shape, names, n).unwrap())
    }

    fn spec(entries: &[&[&str]]) -> Vec<Vec<String>> {
        entries.iter().map(|e| e.iter().map(|s| s.to_string()).collect()).collect()
    }

    #[test]
    fn split_then_assemble_gives_back_the_array() {
        let m = mesh(vec![2, 2], &["a", "b"]);
        let global = [4, 6];
        let bytes: Vec<u8> = (0..24).collect();
        for entries in
            [&[&["a"][..], &[]][..], &[&[], &["b"]], &[&["a"], &["b"]], &[&["b", "a"], &[]]]
        {
            let s = Sharding::new(m.clone(), &spec(entries), &global).unwrap();
            let shards = s.split(&bytes, 1, &global);
            assert_eq!(shards.len(), 4);
            assert_eq!(s.assemble(&shards, 1, &global), bytes, "{}", s.spec());
        }
    }

    #[test]
    fn shards_hold_the_rows_their_coordinates_name() {
        let m = mesh(vec![2, 2], &["a", "b"]);
        let s = Sharding::new(m, &spec(&[&["a"], &["b"]]), &[2, 4]).unwrap();
        let bytes: Vec<u8> = (0..8).collect();
        let shards = s.split(&bytes, 1, &[2, 4]);
        // Partition 1 is mesh coordinates (0, 1): row 0, columns 2..4.
        assert_eq!(shards[1], vec![2, 3]);
        assert_eq!(shards[2], vec![4, 5]);
        assert_eq!(s.sdy(), "#sdy.sharding<@mesh, [{\"a\"}, {\"b\"}]>");
        assert_eq!(s.spec(), "('a', 'b')");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let m = mesh(vec![4], &["data"]);
        let err = Sharding::new(m.clone(), &spec(&[&["model"], &[]]), &[8, 2]).unwrap_err();
        assert!(err.to_string().contains("no axis \"model\""), "{err}");
        let err = Sharding::new(m.clone(), &spec(&[&["data"], &[]]), &[6, 2]).unwrap_err();
        assert!(err.to_string().contains("size 6 cannot be split 4 ways"), "{err}");
        let err = Sharding::new(m, &spec(&[&["data"]]), &[8, 2]).unwrap_err();
        assert!(err.to_string().contains("1 entries but the tensor has 2"), "{err}");
    }
}
