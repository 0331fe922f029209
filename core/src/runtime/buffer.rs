//! Device buffers: created from host data, read back to host, released on drop.

use std::sync::Arc;

use super::client::{Client, ClientHandle};
use super::ffi::{self, args, call};
use crate::dtype::{shape_string, DType, NativeType};
use crate::error::Result;
use crate::Error;

/// An array on a device. Dropping it releases the PJRT buffer (exactly once).
pub struct Buffer {
    client: Arc<ClientHandle>,
    pub(crate) raw: *mut ffi::PJRT_Buffer,
    dtype: DType,
    dims: Vec<i64>,
}

// SAFETY: PJRT buffers are thread-safe handles; this wrapper is their only owner.
unsafe impl Send for Buffer {}
// SAFETY: as above; `&Buffer` only reads.
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        let mut a = args!(PJRT_Buffer_Destroy_Args { buffer: self.raw });
        let _ = call!(self.client.plugin, PJRT_Buffer_Destroy, &mut a);
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({})", shape_string(self.dtype, &self.dims))
    }
}

pub(crate) fn element_count(dims: &[i64]) -> usize {
    dims.iter().map(|&d| d.max(0) as usize).product()
}

impl Client {
    /// Copies typed host data with the given dims to device `device` (an index into `devices()`).
    pub fn buffer_from_host<T: NativeType>(
        &self,
        data: &[T],
        dims: &[i64],
        device: usize,
    ) -> Result<Buffer> {
        // SAFETY: `T: NativeType` is laid out exactly as its dtype's elements.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        self.buffer_from_bytes(bytes, T::DTYPE, dims, device)
    }

    /// Copies dense row-major host bytes of `dtype` elements with the given dims to a device.
    pub fn buffer_from_bytes(
        &self,
        bytes: &[u8],
        dtype: DType,
        dims: &[i64],
        device: usize,
    ) -> Result<Buffer> {
        let expected = element_count(dims);
        let given = bytes.len() / dtype.size_bytes();
        if dims.iter().any(|&d| d < 0) || given != expected || bytes.len() % dtype.size_bytes() != 0
        {
            return Err(Error::HostDataSize { dims: dims.to_vec(), expected, given });
        }
        let device = self.device(device)?;
        let plugin = self.handle.plugin;
        let mut a = args!(PJRT_Client_BufferFromHostBuffer_Args {
            client: self.handle.raw,
            data: bytes.as_ptr() as *const _,
            type_: pjrt_type(dtype),
            dims: dims.as_ptr(),
            num_dims: dims.len(),
            host_buffer_semantics: ffi::PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
            device: device.raw,
        });
        call!(plugin, PJRT_Client_BufferFromHostBuffer, &mut a)?;
        let buffer =
            Buffer { client: self.handle.clone(), raw: a.buffer, dtype, dims: dims.to_vec() };
        // `bytes` is only borrowed: wait until the plugin no longer reads it.
        plugin.await_event(a.done_with_host_buffer)?;
        Ok(buffer)
    }
}

impl Buffer {
    /// Wraps a buffer PJRT returned, reading its element type and dims from the plugin.
    pub(crate) fn from_raw(
        client: Arc<ClientHandle>,
        raw: *mut ffi::PJRT_Buffer,
    ) -> Result<Buffer> {
        let plugin = client.plugin;
        // Own it first so it is released even if a query below fails.
        let mut buffer = Buffer { client, raw, dtype: DType::Pred, dims: Vec::new() };
        let mut t = args!(PJRT_Buffer_ElementType_Args { buffer: raw });
        call!(plugin, PJRT_Buffer_ElementType, &mut t)?;
        buffer.dtype = dtype_from_pjrt(t.type_)
            .ok_or_else(|| Error::Unsupported(format!("PJRT element type {}", t.type_)))?;
        let mut d = args!(PJRT_Buffer_Dimensions_Args { buffer: raw });
        call!(plugin, PJRT_Buffer_Dimensions, &mut d)?;
        if !d.dims.is_null() {
            // SAFETY: PJRT returns `num_dims` dims owned by the buffer.
            buffer.dims = unsafe { std::slice::from_raw_parts(d.dims, d.num_dims) }.to_vec();
        }
        Ok(buffer)
    }

    /// Wraps a buffer whose type is already known (an executable's declared output).
    pub(crate) fn from_raw_typed(
        client: Arc<ClientHandle>,
        raw: *mut ffi::PJRT_Buffer,
        dtype: DType,
        dims: Vec<i64>,
    ) -> Buffer {
        Buffer { client, raw, dtype, dims }
    }

    /// A copy of this buffer on device `device` (an index into the client's devices).
    pub fn copy_to_device(&self, client: &Client, device: usize) -> Result<Buffer> {
        let device = client.device(device)?;
        let mut a =
            args!(PJRT_Buffer_CopyToDevice_Args { buffer: self.raw, dst_device: device.raw });
        call!(self.client.plugin, PJRT_Buffer_CopyToDevice, &mut a)?;
        Ok(Buffer {
            client: self.client.clone(),
            raw: a.dst_buffer,
            dtype: self.dtype,
            dims: self.dims.clone(),
        })
    }

    /// The raw buffer, for benchmarks that compare against direct C calls.
    #[doc(hidden)]
    pub fn as_raw(&self) -> *mut ffi::PJRT_Buffer {
        self.raw
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    pub fn element_count(&self) -> usize {
        element_count(&self.dims)
    }

    pub fn size_bytes(&self) -> usize {
        self.element_count() * self.dtype.size_bytes()
    }

    /// True once the buffer was donated to an execution (its memory now belongs to an output).
    pub fn is_deleted(&self) -> bool {
        let mut a = args!(PJRT_Buffer_IsDeleted_Args { buffer: self.raw });
        call!(self.client.plugin, PJRT_Buffer_IsDeleted, &mut a).is_ok() && a.is_deleted
    }

    /// Copies the buffer to host as a `Vec<T>`; `T` must match the buffer's dtype.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch { actual: self.dtype, requested: T::DTYPE });
        }
        let mut out: Vec<T> = Vec::with_capacity(self.element_count());
        // SAFETY: the spare capacity is exactly `size_bytes()` long; `copy_into` fills all of it
        // before `set_len` (on error the Vec is dropped with length 0).
        unsafe {
            let spare =
                std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, self.size_bytes());
            self.copy_into(spare)?;
            out.set_len(self.element_count());
        }
        Ok(out)
    }

    /// Copies the buffer to host as dense row-major bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.size_bytes()];
        self.copy_into(&mut out)?;
        Ok(out)
    }

    fn copy_into(&self, dst: &mut [u8]) -> Result<()> {
        if self.is_deleted() {
            return Err(Error::BufferDeleted);
        }
        if dst.is_empty() {
            return Ok(()); // zero-size arrays have nothing to copy
        }
        let plugin = self.client.plugin;
        let mut a = args!(PJRT_Buffer_ToHostBuffer_Args {
            src: self.raw,
            dst: dst.as_mut_ptr() as *mut _,
            dst_size: dst.len(),
        });
        call!(plugin, PJRT_Buffer_ToHostBuffer, &mut a)?;
        plugin.await_event(a.event)
    }
}

/// Typed values from dense bytes of `T`'s dtype (host data gathered from shards).
pub(crate) fn typed_from_bytes<T: NativeType>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut out: Vec<T> = Vec::with_capacity(n);
    // SAFETY: `T: NativeType` is plain data laid out as its dtype's elements; exactly
    // `n * size_of::<T>()` bytes are copied into the spare capacity before `set_len`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            out.as_mut_ptr() as *mut u8,
            n * std::mem::size_of::<T>(),
        );
        out.set_len(n);
    }
    out
}

pub(crate) fn pjrt_type(dtype: DType) -> ffi::PJRT_Buffer_Type {
    match dtype {
        DType::Pred => ffi::PJRT_Buffer_Type_PRED,
        DType::S8 => ffi::PJRT_Buffer_Type_S8,
        DType::S16 => ffi::PJRT_Buffer_Type_S16,
        DType::C64 => ffi::PJRT_Buffer_Type_C64,
        DType::C128 => ffi::PJRT_Buffer_Type_C128,
        DType::S32 => ffi::PJRT_Buffer_Type_S32,
        DType::S64 => ffi::PJRT_Buffer_Type_S64,
        DType::U8 => ffi::PJRT_Buffer_Type_U8,
        DType::F16 => ffi::PJRT_Buffer_Type_F16,
        DType::BF16 => ffi::PJRT_Buffer_Type_BF16,
        DType::F32 => ffi::PJRT_Buffer_Type_F32,
        DType::F64 => ffi::PJRT_Buffer_Type_F64,
    }
}

fn dtype_from_pjrt(t: ffi::PJRT_Buffer_Type) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| pjrt_type(d) == t)
}
