//! A call's buffers as an engine sees them: what it reads and what it writes, each plain
//! memory or a registered [`Buffer`]. The holder of a started call (a request, a persistent
//! request, a step of node phases) keeps its buffers and lends them to every progress, so a
//! started call (an engine's task) borrows nothing.

use crate::fabric::RegisteredMemory;

use super::buffer::{Buffer, Output, Payload, PayloadMut};
use super::error::Result;

/// What a call reads and writes.
#[derive(Default)]
pub(crate) struct Memory<'m> {
    pub send: Option<Input<'m>>,
    pub recv: Option<Output<'m>>,
}

/// Bytes a call reads, and their registration where they are a [`Buffer`].
#[derive(Clone, Copy)]
pub(crate) struct Input<'m> {
    pub bytes: &'m [u8],
    pub registered: Option<&'m RegisteredMemory>,
}

impl<'m> Memory<'m> {
    /// The memory of a call on `send` and `recv`, whichever kinds they are.
    pub fn of<S, R>(send: Option<&'m S>, recv: Option<&'m mut R>) -> Self
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        Memory {
            send: send.map(Input::of),
            recv: recv.map(|r| r.output()),
        }
    }

    /// The memory of a call on registered buffers (a persistent request's, a step's).
    pub fn of_buffers(send: Option<&'m Buffer>, recv: Option<&'m mut Buffer>) -> Self {
        Memory {
            send: send.map(Input::of),
            recv: recv.map(Output::Registered),
        }
    }

    /// The same memory, lent for one progress.
    pub fn reborrow(&mut self) -> Memory<'_> {
        Memory {
            send: self.send,
            recv: self.recv.as_mut().map(Output::reborrow),
        }
    }

    /// The bytes read (none where there is no send buffer).
    pub fn send_bytes(&self) -> &[u8] {
        self.send.map_or(&[], |s| s.bytes)
    }

    /// The bytes written (none where there is no receive buffer).
    pub fn recv_bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.recv {
            Some(recv) => recv.bytes_mut(),
            None => &mut [],
        }
    }
}

impl<'m> Input<'m> {
    /// The bytes of `payload`.
    pub fn of<S: Payload + ?Sized>(payload: &'m S) -> Self {
        Input {
            bytes: payload.bytes(),
            registered: payload.registered(),
        }
    }
}

/// A send and a receive buffer of registered memory, grown as calls need: the memory of the
/// steps a call of several steps runs on another communicator.
#[derive(Default)]
pub(crate) struct StepBuffers {
    pub send: Option<Buffer>,
    pub recv: Option<Buffer>,
}

impl StepBuffers {
    /// Both buffers at `send` and `recv` bytes, allocated with `alloc` (of a communicator)
    /// where they are short.
    pub fn fit(
        &mut self,
        alloc: impl Fn(usize) -> Result<Buffer>,
        send: usize,
        recv: usize,
    ) -> Result<()> {
        for (slot, len) in [(&mut self.send, send), (&mut self.recv, recv)] {
            if slot.as_ref().map_or(true, |b| b.capacity() < len) {
                *slot = Some(alloc(len.max(64))?);
            }
            if let Some(buffer) = slot.as_mut() {
                buffer.set_len(len)?;
            }
        }
        Ok(())
    }

    /// The buffers as a call's memory.
    pub fn memory(&mut self) -> Memory<'_> {
        Memory::of_buffers(self.send.as_ref(), self.recv.as_mut())
    }
}
