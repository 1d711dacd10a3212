//! The buffers of an operation and the steps a rank runs on them alone: copies and combines
//! (reductions) between its send, receive and scratch buffers.

use crate::fabric::{RegisteredMemory, RemoteRegion};
use crate::plan::{Buf, Local};

use super::{Result, TransportError};

/// A range of registered memory one operation works on.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The registration the range lies in.
    pub mem: &'a RegisteredMemory,
    /// Start of the range in it.
    pub offset: usize,
    /// Length of the range.
    pub len: usize,
}

impl<'a> View<'a> {
    /// The first `len` bytes of `mem` (at most all of it).
    pub fn prefix(mem: &'a RegisteredMemory, len: usize) -> Self {
        View {
            mem,
            offset: 0,
            len: len.min(mem.len()),
        }
    }

    pub(super) fn remote(&self) -> RemoteRegion {
        self.within(self.mem.remote())
    }

    /// The range as a writer reached through `endpoint` sees it, if the memory is registered
    /// with that endpoint's domain.
    pub(super) fn remote_for(&self, endpoint: &crate::fabric::Endpoint) -> Option<RemoteRegion> {
        self.mem
            .remote_for(endpoint)
            .map(|whole| self.within(whole))
    }

    fn within(&self, whole: RemoteRegion) -> RemoteRegion {
        RemoteRegion {
            base: whole.base + self.offset as u64,
            len: self.len as u64,
            key: whole.key,
        }
    }
}

/// The buffers of one operation; a buffer the plan does not use may be `None`.
#[derive(Clone, Copy, Default)]
pub struct BufferViews<'a> {
    /// The send buffer.
    pub send: Option<View<'a>>,
    /// The receive buffer.
    pub recv: Option<View<'a>>,
    /// Library scratch memory.
    pub scratch: Option<View<'a>>,
}

impl<'a> BufferViews<'a> {
    pub(super) fn get(&self, buf: Buf) -> Option<View<'a>> {
        match buf {
            Buf::Send => self.send,
            Buf::Recv => self.recv,
            Buf::Scratch => self.scratch,
        }
    }

    /// The buffer `buf` of operation `op`, which its plan uses.
    pub(super) fn view(&self, op: &str, buf: Buf) -> Result<View<'a>> {
        self.get(buf).ok_or_else(|| TransportError::Invalid {
            op: op.to_string(),
            what: format!("the plan uses a {buf} buffer that was not given"),
        })
    }

    /// Like [`Self::view`], for a buffer a step writes into (never the send buffer).
    fn writable(&self, op: &str, buf: Buf) -> Result<View<'a>> {
        if buf == Buf::Send {
            return Err(protocol(op, "the plan writes into the send buffer".into()));
        }
        self.view(op, buf)
    }
}

fn protocol(op: &str, what: String) -> TransportError {
    TransportError::Protocol {
        op: op.to_string(),
        what,
    }
}

/// Runs local steps; keeps the buffer that combine results go through, so that it is
/// allocated once per operation rather than once per step.
#[derive(Default)]
pub(super) struct LocalSteps {
    combined: Vec<u8>,
}

impl LocalSteps {
    /// Most bytes of combining space kept from one operation for the next.
    const KEPT: usize = 1 << 20;

    /// These steps' space for a later operation, unless it grew large (a big reduction's
    /// space is not held between calls).
    pub fn kept(self) -> Self {
        if self.combined.capacity() > Self::KEPT {
            LocalSteps::default()
        } else {
            self
        }
    }

    /// Runs `steps` of operation `op` on `buffers`, adding the bytes copied to `copied` as it
    /// goes (a step that fails leaves the count of those before it).
    pub fn run(
        &mut self,
        op: &str,
        steps: &[Local],
        buffers: &BufferViews<'_>,
        copied: &mut u64,
    ) -> Result<()> {
        for step in steps {
            match *step {
                Local::Copy {
                    src,
                    src_offset,
                    dst,
                    dst_offset,
                    len,
                } => {
                    let (s, d) = (buffers.view(op, src)?, buffers.writable(op, dst)?);
                    let (from, to) = (s.offset + src_offset, d.offset + dst_offset);
                    // In place (the send buffer is part of the receive buffer): nothing to copy.
                    if std::ptr::eq(s.mem, d.mem) && from == to {
                        continue;
                    }
                    d.mem.copy_from(to, s.mem, from, len)?;
                    *copied += len as u64;
                }
                Local::Combine {
                    reduction,
                    a,
                    b,
                    dst,
                    len,
                } => {
                    let (va, vb, vd) = (
                        buffers.view(op, a.0)?,
                        buffers.view(op, b.0)?,
                        buffers.writable(op, dst.0)?,
                    );
                    // The result goes through a buffer kept here: dst may overlap a or b.
                    let x = bytes(op, va, a.1, len)?;
                    let y = bytes(op, vb, b.1, len)?;
                    self.combined.resize(len, 0);
                    reduction.combine(x, y, &mut self.combined)?;
                    vd.mem.store(vd.offset + dst.1, &self.combined)?;
                }
            }
        }
        Ok(())
    }
}

/// `len` bytes at `offset` of a view, read in place.
fn bytes<'b>(op: &str, view: View<'b>, offset: usize, len: usize) -> Result<&'b [u8]> {
    let start = view.offset + offset;
    view.mem
        .as_slice()
        .get(start..start + len)
        .ok_or_else(|| protocol(op, format!("a local step reads past a buffer at {start}")))
}
