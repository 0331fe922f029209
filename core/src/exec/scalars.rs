//! Host scalars on the device. Each is a 0-d input of its own dtype; a buffer per distinct
//! (dtype, value) is uploaded once and reused by every later sync that passes the same value, so a
//! step whose scalars do not change (a fixed learning rate, the constants of a loop) uploads
//! nothing, and one whose scalars change uploads only those.

use std::collections::HashMap;
use std::sync::Arc;

use crate::dtype::{f64_to_bytes, DType};
use crate::error::Result;
use crate::runtime::{Buffer, Client};

/// Past this many distinct values the buffers are let go of and uploaded again as needed: a value
/// that changes every step (Adam's bias corrections) would otherwise keep one buffer per step.
const CAPACITY: usize = 1024;

#[derive(Default)]
pub(crate) struct ScalarBuffers {
    by_value: HashMap<(usize, DType, u64), Arc<Buffer>>,
}

impl ScalarBuffers {
    /// The device buffers of `scalars` on `device`, in order, and the bytes uploaded for them.
    pub fn get(
        &mut self,
        client: &Client,
        device: usize,
        scalars: &[(f64, DType)],
    ) -> Result<(Vec<Arc<Buffer>>, u64)> {
        if self.by_value.len() + scalars.len() > CAPACITY {
            self.by_value.clear();
        }
        let mut uploaded = 0;
        let mut buffers = Vec::with_capacity(scalars.len());
        for &(value, dtype) in scalars {
            let buffer = match self.by_value.get(&(device, dtype, value.to_bits())) {
                Some(b) => b.clone(),
                None => {
                    let bytes = f64_to_bytes(dtype, value);
                    let b = client.buffer_from_bytes(
                        &bytes[..dtype.size_bytes()],
                        dtype,
                        &[],
                        device,
                    )?;
                    uploaded += b.size_bytes() as u64;
                    let b = Arc::new(b);
                    self.by_value.insert((device, dtype, value.to_bits()), b.clone());
                    b
                }
            };
            buffers.push(buffer);
        }
        Ok((buffers, uploaded))
    }
}
