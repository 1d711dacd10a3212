//! Where a plan's data lives while the transport runs it: registered memory (a
//! [`Buffer`](super::Buffer)) is used as it is; plain memory is staged, copied into the
//! communicator's registered staging memory at the start and out of it at the end.

use crate::fabric::Access::{self, Local, RemoteWrite};
use crate::fabric::RegisteredMemory;
use crate::plan;
use crate::transport::{BufferViews, Transport, View};

use super::error::argument;
use super::error::Result;
use super::memory::Memory;
use super::plan_cache::CallKey;

/// The communicator's own memory for plans: scratch, and staging for plain memory. It only
/// grows, so that a sequence of calls registers O(log) times.
#[derive(Default)]
pub(crate) struct Staging {
    send: Option<RegisteredMemory>,
    recv: Option<RegisteredMemory>,
    scratch: Option<RegisteredMemory>,
}

/// Where a plan's send buffer is.
#[derive(Clone, Copy, Debug)]
enum SendAt {
    /// The plan sends nothing.
    None,
    /// The caller's registered buffer, `len` bytes of it.
    Registered(usize),
    /// The send staging memory, `len` bytes of it.
    Staged(usize),
    /// (offset, length) within the receive buffer (in place).
    InRecv(usize, usize),
}

/// Where a plan's receive buffer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecvAt {
    /// The plan receives nothing.
    None,
    /// The caller's registered buffer.
    Registered,
    /// The receive staging memory, copied out into the caller's memory at the end.
    Staged,
}

/// Where one operation's buffers are, and how much of them the plan uses; the memory itself
/// is the call's, lent to every progress.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    send: SendAt,
    recv: RecvAt,
    recv_len: usize,
    scratch_len: usize,
}

impl Placement {
    /// Whether a result is staged and copied out at the end.
    pub fn stages_out(&self) -> bool {
        self.recv == RecvAt::Staged
    }
}

impl Staging {
    /// Places the buffers of call `key` for a plan that needs `need`: registered buffers as
    /// they are, plain ones staged (their input copied in now); makes sure the scratch memory
    /// is there. Returns the placement and the bytes staged in.
    pub fn place(
        &mut self,
        transport: &Transport,
        key: CallKey<'_>,
        need: plan::BufferSizes,
        memory: &Memory<'_>,
    ) -> Result<(Placement, usize)> {
        ensure(transport, &mut self.scratch, need.scratch, RemoteWrite)?;
        let mut copied = 0usize;
        let send = match (memory.send, key.send_in_recv) {
            _ if need.send == 0 => SendAt::None,
            (_, Some((offset, len))) => SendAt::InRecv(offset, len),
            (Some(s), None) if s.registered.is_some() => SendAt::Registered(s.bytes.len()),
            (s, None) => {
                let bytes = s.map_or(&[][..], |s| s.bytes);
                let part = &bytes[..need.send.min(bytes.len())];
                ensure(transport, &mut self.send, need.send, Local)?;
                if let Some(stage) = &self.send {
                    stage.store(0, part)?;
                }
                copied += part.len();
                SendAt::Staged(need.send)
            }
        };
        // Only what the plan receives is staged: a rank that receives nothing (a non-root of
        // reduce or gather) keeps its buffer as it was.
        let recv_len = need.recv;
        let recv = match &memory.recv {
            _ if recv_len == 0 => RecvAt::None,
            None => RecvAt::None,
            Some(r) if r.registered().is_some_and(|m| m.len() >= recv_len) => RecvAt::Registered,
            Some(r) => {
                let user = r.bytes();
                let part = recv_len.min(user.len());
                ensure(transport, &mut self.recv, recv_len, RemoteWrite)?;
                if let Some(stage) = &self.recv {
                    match key.send_in_recv {
                        // In place: only this rank's part is input, the plan writes the rest.
                        Some((offset, len)) => {
                            let mine = user.get(offset..offset + len).ok_or_else(|| {
                                argument(key.op, "the in-place part lies outside recv".to_string())
                            })?;
                            stage.store(offset, mine)?;
                            copied += len;
                        }
                        None if key.copy_in_recv => {
                            stage.store(0, &user[..part])?;
                            copied += part;
                        }
                        None => {}
                    }
                }
                RecvAt::Staged
            }
        };
        let placement = Placement {
            send,
            recv,
            recv_len,
            scratch_len: need.scratch,
        };
        Ok((placement, copied))
    }

    /// The transport's view of the buffers of an operation placed as `placement` on
    /// `memory`.
    pub fn views<'x>(&'x self, placement: &Placement, memory: &'x Memory<'_>) -> BufferViews<'x> {
        let prefix = |mem: Option<&'x RegisteredMemory>, len| mem.map(|m| View::prefix(m, len));
        let recv = match placement.recv {
            RecvAt::None => None,
            RecvAt::Registered => prefix(
                memory.recv.as_ref().and_then(|r| r.registered()),
                placement.recv_len,
            ),
            RecvAt::Staged => prefix(self.recv.as_ref(), placement.recv_len),
        };
        let send = match placement.send {
            SendAt::None => None,
            SendAt::Registered(len) => prefix(memory.send.and_then(|s| s.registered), len),
            SendAt::Staged(len) => prefix(self.send.as_ref(), len),
            SendAt::InRecv(offset, len) => recv.map(|v| View {
                mem: v.mem,
                offset: v.offset + offset,
                len,
            }),
        };
        BufferViews {
            send,
            recv,
            scratch: prefix(self.scratch.as_ref(), placement.scratch_len),
        }
    }

    /// Copies a staged result out into the caller's memory; returns the bytes copied.
    pub fn stage_out(&self, placement: &Placement, memory: &mut Memory<'_>) -> Result<usize> {
        match (placement.recv, &self.recv, memory.recv.as_mut()) {
            (RecvAt::Staged, Some(stage), Some(recv)) => {
                let user = recv.bytes_mut();
                let len = placement.recv_len.min(user.len());
                stage.read(0, &mut user[..len])?;
                Ok(len)
            }
            _ => Ok(0),
        }
    }

    /// Makes the scratch memory hold at least `len` bytes (kept for later calls).
    pub fn ensure_scratch(&mut self, transport: &Transport, len: usize) -> Result<()> {
        ensure(transport, &mut self.scratch, len, RemoteWrite)
    }

    /// The scratch memory, `len` bytes of it.
    pub fn scratch_view(&self, len: usize) -> Option<View<'_>> {
        self.scratch.as_ref().map(|m| View::prefix(m, len))
    }
}

/// Makes `slot` hold registered memory of at least `len` bytes with `access` (kept for later
/// calls).
pub(crate) fn ensure(
    transport: &Transport,
    slot: &mut Option<RegisteredMemory>,
    len: usize,
    access: Access,
) -> Result<()> {
    if len > 0 && slot.as_ref().map_or(true, |m| m.len() < len) {
        // Grow by doubling so that a sequence of growing calls registers O(log) times.
        let len = len.max(slot.as_ref().map_or(0, |m| m.len() * 2));
        *slot = Some(transport.alloc(len, access)?);
    }
    Ok(())
}
