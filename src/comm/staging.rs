//! Where a call's data lives while the transport runs it: registered memory (a
//! [`Buffer`](super::Buffer)) is used as it is; plain memory is staged, copied into the
//! communicator's registered staging memory at the start and out of it at the end.

use crate::fabric::Access::{self, Local, RemoteWrite};
use crate::fabric::RegisteredMemory;
use crate::plan;
use crate::transport::{BufferViews, Transport, View};

use super::arguments::argument;
use super::plan_cache::CallKey;
use super::{Communicator, Payload, PayloadMut, Result};

/// Where the plan's send buffer is.
#[derive(Clone, Copy)]
pub(super) enum SendSource<'a> {
    /// The plan sends nothing.
    None,
    /// The caller's registered buffer, `len` bytes of it.
    Registered(&'a RegisteredMemory, usize),
    /// The communicator's send staging memory, `len` bytes of it.
    Staged(usize),
    /// (offset, length) within the receive buffer (in place).
    InRecv(usize, usize),
}

/// Where the plan's receive buffer is.
pub(super) enum RecvTarget<'a> {
    /// The plan receives nothing.
    None,
    Registered(&'a RegisteredMemory),
    /// The communicator's receive staging memory, copied into `user` when complete.
    Staged(&'a mut [u8]),
}

/// Where one operation's buffers are, and how much of them the plan uses.
pub(super) struct Placement<'a> {
    pub send: SendSource<'a>,
    pub recv: RecvTarget<'a>,
    pub recv_len: usize,
    pub scratch_len: usize,
    /// Bytes staged in.
    pub copied: usize,
}

/// A placement on registered memory without the memory: what a call detached from its
/// buffers keeps ([`super::detached`]), to be placed on the same buffers again.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    send: SendShape,
    recv: bool,
    recv_len: usize,
    scratch_len: usize,
}

#[derive(Clone, Copy)]
enum SendShape {
    None,
    Registered(usize),
    InRecv(usize, usize),
}

impl Shape {
    /// The placement on `send` and `recv`, the buffers the call started on.
    pub fn place<'x>(
        &self,
        send: Option<&'x RegisteredMemory>,
        recv: Option<&'x RegisteredMemory>,
    ) -> Placement<'x> {
        let send = match (self.send, send) {
            (SendShape::Registered(len), Some(mem)) => SendSource::Registered(mem, len),
            (SendShape::InRecv(at, len), _) => SendSource::InRecv(at, len),
            _ => SendSource::None,
        };
        let recv = match (self.recv, recv) {
            (true, Some(mem)) => RecvTarget::Registered(mem),
            _ => RecvTarget::None,
        };
        Placement {
            send,
            recv,
            recv_len: self.recv_len,
            scratch_len: self.scratch_len,
            copied: 0,
        }
    }
}

/// The communicator's own memory an operation may use.
#[derive(Clone, Copy)]
pub(super) struct Owned<'x> {
    stage_send: Option<&'x RegisteredMemory>,
    stage_recv: Option<&'x RegisteredMemory>,
    scratch: Option<&'x RegisteredMemory>,
}

impl<'x> Placement<'x> {
    /// No buffers: a call that does not run a plan.
    pub fn empty() -> Self {
        Placement {
            send: SendSource::None,
            recv: RecvTarget::None,
            recv_len: 0,
            scratch_len: 0,
            copied: 0,
        }
    }

    /// The transport's view of the buffers.
    pub fn views(&self, owned: Owned<'x>) -> BufferViews<'x> {
        let recv_view = match &self.recv {
            RecvTarget::None => None,
            RecvTarget::Registered(mem) => Some(View::prefix(mem, self.recv_len)),
            RecvTarget::Staged(_) => owned.stage_recv.map(|m| View::prefix(m, self.recv_len)),
        };
        let send_view = match self.send {
            SendSource::None => None,
            SendSource::Registered(mem, len) => Some(View::prefix(mem, len)),
            SendSource::Staged(len) => owned.stage_send.map(|m| View::prefix(m, len)),
            SendSource::InRecv(offset, len) => recv_view.map(|v| View {
                mem: v.mem,
                offset: v.offset + offset,
                len,
            }),
        };
        BufferViews {
            send: send_view,
            recv: recv_view,
            scratch: owned.scratch.map(|m| View::prefix(m, self.scratch_len)),
        }
    }

    /// Its shape, where nothing is staged.
    pub fn shape(&self) -> Option<Shape> {
        let send = match self.send {
            SendSource::None => SendShape::None,
            SendSource::Registered(_, len) => SendShape::Registered(len),
            SendSource::InRecv(at, len) => SendShape::InRecv(at, len),
            SendSource::Staged(_) => return None,
        };
        let recv = match self.recv {
            RecvTarget::None => false,
            RecvTarget::Registered(_) => true,
            RecvTarget::Staged(_) => return None,
        };
        Some(Shape {
            send,
            recv,
            recv_len: self.recv_len,
            scratch_len: self.scratch_len,
        })
    }

    /// Copies a staged result out into the caller's memory; returns the bytes copied.
    pub fn stage_out(&mut self, comm: &Communicator) -> Result<usize> {
        match (&mut self.recv, &comm.stage_recv) {
            (RecvTarget::Staged(user), Some(stage)) => {
                stage.read(0, user)?;
                Ok(user.len())
            }
            _ => Ok(0),
        }
    }
}

impl Communicator {
    /// Places the buffers of call `call` for a plan that needs `need`: registered buffers as they
    /// are, plain ones staged (their input copied in now). Also makes sure the scratch memory
    /// is there.
    pub(super) fn place<'a, S, R>(
        &mut self,
        call: CallKey<'_>,
        need: plan::BufferSizes,
        send: Option<&'a S>,
        recv: Option<&'a mut R>,
    ) -> Result<Placement<'a>>
    where
        S: Payload + ?Sized,
        R: PayloadMut + ?Sized,
    {
        ensure(
            &self.transport,
            &mut self.scratch,
            need.scratch,
            RemoteWrite,
        )?;
        let mut copied = 0usize;

        let send_source = match (send, call.send_in_recv) {
            _ if need.send == 0 => SendSource::None,
            (_, Some((offset, len))) => SendSource::InRecv(offset, len),
            (Some(s), None) if s.registered().is_some() => match s.registered() {
                Some(mem) => SendSource::Registered(mem, s.bytes().len()),
                None => SendSource::None,
            },
            (s, None) => {
                let bytes = s.map_or(&[][..], |s| s.bytes());
                let part = &bytes[..need.send.min(bytes.len())];
                ensure(&self.transport, &mut self.stage_send, need.send, Local)?;
                if let Some(stage) = &self.stage_send {
                    stage.store(0, part)?;
                }
                copied += part.len();
                SendSource::Staged(need.send)
            }
        };

        // Only what the plan receives is staged: a rank that receives nothing (a non-root of
        // reduce or gather) keeps its buffer as it was.
        let recv_len = need.recv;
        let recv_target = match recv {
            _ if recv_len == 0 => RecvTarget::None,
            None => RecvTarget::None,
            Some(r) if r.registered().is_some_and(|m| m.len() >= recv_len) => {
                let r: &'a R = r;
                match r.registered() {
                    Some(mem) => RecvTarget::Registered(mem),
                    None => RecvTarget::None,
                }
            }
            Some(r) => {
                let user = r.bytes_mut();
                let part = recv_len.min(user.len());
                ensure(&self.transport, &mut self.stage_recv, recv_len, RemoteWrite)?;
                if let Some(stage) = &self.stage_recv {
                    match call.send_in_recv {
                        // In place: only this rank's part is input, the plan writes the rest.
                        Some((offset, len)) => {
                            let mine = user.get(offset..offset + len).ok_or_else(|| {
                                argument(call.op, "the in-place part lies outside recv".to_string())
                            })?;
                            stage.store(offset, mine)?;
                            copied += len;
                        }
                        None if call.copy_in_recv => {
                            stage.store(0, &user[..part])?;
                            copied += part;
                        }
                        None => {}
                    }
                }
                RecvTarget::Staged(&mut user[..part])
            }
        };
        Ok(Placement {
            send: send_source,
            recv: recv_target,
            recv_len,
            scratch_len: need.scratch,
            copied,
        })
    }
}

/// The communicator's transport, and beside it the memory it owns.
pub(super) fn split(comm: &mut Communicator) -> (&mut Transport, Owned<'_>) {
    let Communicator {
        transport,
        stage_send,
        stage_recv,
        scratch,
        ..
    } = comm;
    let owned = Owned {
        stage_send: stage_send.as_ref(),
        stage_recv: stage_recv.as_ref(),
        scratch: scratch.as_ref(),
    };
    (transport, owned)
}

/// Makes `slot` hold registered memory of at least `len` bytes with `access` (kept for later
/// calls).
pub(super) fn ensure(
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
