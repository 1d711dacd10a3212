//! The memory a collective works on: registered buffers from [`super::Communicator::alloc`]
//! (the zero-copy path) or plain slices (staged through library memory).

use std::ops::{Deref, DerefMut};

use crate::fabric::RegisteredMemory;
use crate::plan::{Dtype, ReduceOp, Reduction};

use super::error::CommError;

/// Memory registered with the communicator's fabric domain: collectives read from it and peers
/// write into it directly, with no copy. Dereferences to `[u8]`.
pub struct Buffer {
    pub(crate) mem: RegisteredMemory,
    len: usize,
}

impl Buffer {
    pub(crate) fn new(mem: RegisteredMemory, len: usize) -> Self {
        Buffer { mem, len }
    }

    /// Bytes registered: the most [`Self::set_len`] accepts.
    pub fn capacity(&self) -> usize {
        self.mem.len()
    }

    /// Changes the length the buffer presents (and collectives use) within its capacity, so
    /// that one registration serves calls of different sizes. An error if `len` exceeds the
    /// capacity (the length is then unchanged).
    pub fn set_len(&mut self, len: usize) -> Result<(), CommError> {
        if len > self.capacity() {
            return Err(CommError::Argument {
                op: "set_len",
                what: format!(
                    "{len} bytes exceed the buffer's capacity of {} bytes",
                    self.capacity()
                ),
            });
        }
        self.len = len;
        Ok(())
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.mem.as_slice()[..self.len]
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.mem.as_mut_slice()[..len]
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("len", &self.len).finish()
    }
}

/// Bytes a collective reads: a registered [`Buffer`] or any byte slice.
pub trait Payload {
    /// The bytes to send.
    fn bytes(&self) -> &[u8];
    /// The registration behind the bytes, if they are a [`Buffer`] (then nothing is copied).
    fn registered(&self) -> Option<&RegisteredMemory> {
        None
    }
}

/// Bytes a collective writes.
pub trait PayloadMut: Payload {
    /// The bytes to receive into.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// How the library writes into them: staged where they are plain memory, in place where
    /// they are a [`Buffer`].
    fn output(&mut self) -> Output<'_> {
        Output::Plain(self.bytes_mut())
    }
}

impl Payload for Buffer {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn registered(&self) -> Option<&RegisteredMemory> {
        Some(&self.mem)
    }
}

impl PayloadMut for Buffer {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn output(&mut self) -> Output<'_> {
        Output::Registered(self)
    }
}

impl Payload for [u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl PayloadMut for [u8] {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl Payload for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl PayloadMut for Vec<u8> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

/// Bytes a call writes: plain memory is staged, a registered buffer written in place.
pub enum Output<'m> {
    /// Plain memory.
    Plain(&'m mut [u8]),
    /// Registered memory.
    Registered(&'m mut Buffer),
}

impl Output<'_> {
    /// The bytes written.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Output::Plain(bytes) => bytes,
            Output::Registered(buffer) => buffer,
        }
    }

    /// The same, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Output::Plain(bytes) => bytes,
            Output::Registered(buffer) => &mut buffer[..],
        }
    }

    /// The registration, where the memory is a [`Buffer`].
    pub(crate) fn registered(&self) -> Option<&RegisteredMemory> {
        match self {
            Output::Plain(_) => None,
            Output::Registered(buffer) => Some(&buffer.mem),
        }
    }

    /// The same output, lent for one progress.
    pub fn reborrow(&mut self) -> Output<'_> {
        match self {
            Output::Plain(bytes) => Output::Plain(bytes),
            Output::Registered(buffer) => Output::Registered(buffer),
        }
    }
}

/// Element types of reductions.
pub trait Element: bytemuck::Pod {
    /// The reduction element type this Rust type is.
    const DTYPE: Dtype;
}

impl Element for i32 {
    const DTYPE: Dtype = Dtype::I32;
}
impl Element for i64 {
    const DTYPE: Dtype = Dtype::I64;
}
impl Element for u32 {
    const DTYPE: Dtype = Dtype::U32;
}
impl Element for u64 {
    const DTYPE: Dtype = Dtype::U64;
}
impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
}
impl Element for f64 {
    const DTYPE: Dtype = Dtype::F64;
}

/// The reduction of `op` over `T` (checked when the call is planned).
pub(crate) fn typed<T: Element>(op: ReduceOp) -> Reduction {
    Reduction {
        dtype: T::DTYPE,
        op,
    }
}
