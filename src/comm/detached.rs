//! A started call kept apart from its buffers: what a request of several steps holds for the
//! step that runs (the node phases, [`super::phased`]), and what a persistent request holds
//! for its start ([`super::Persistent`]), so that the buffers can live beside it instead of
//! being borrowed by it. Calls on registered buffers ([`Buffer`]s) detach as they run:
//! nothing of them is staged, so giving the same buffers again at each progress finds what
//! the start gave the transport.

use crate::transport::segment::{Run, Source};
use crate::transport::{OpStats, Operation};

use super::call::Call;
use super::phased::PhasedCall;
use super::segment::SegmentCall;
use super::staging::{split, Shape};
use super::{Buffer, Communicator, Result};

/// A started call without its buffers.
pub(super) struct Detached {
    state: Running,
    /// What the call did, once it completed (node phases count nothing here).
    stats: OpStats,
}

// Kept inline, as a request keeps its operation: one step runs at a time.
#[allow(clippy::large_enum_variant)]
enum Running {
    /// A plan's operation (taken when it finishes).
    Plan(Option<Operation>, Shape),
    /// A call on the segment (taken while it progresses), and where its part comes from.
    Segment(Option<Run>, SendPart),
    /// Node phases, whose receive buffer is the one given to each progress.
    Phases(Box<PhasedCall>),
    /// Complete when it was detached.
    Done,
}

/// Where a call on the segment takes this rank's part from.
#[derive(Clone, Copy)]
enum SendPart {
    None,
    Send,
    InRecv(usize, usize),
}

impl Detached {
    pub(super) fn plan(operation: Operation, shape: Shape) -> Self {
        Detached {
            state: Running::Plan(Some(operation), shape),
            stats: OpStats::default(),
        }
    }

    pub(super) fn segment(call: SegmentCall<'_>) -> Self {
        let send = match call.send {
            Source::None => SendPart::None,
            Source::Send(_) => SendPart::Send,
            Source::InRecv(at, len) => SendPart::InRecv(at, len),
        };
        Detached {
            state: Running::Segment(Some(call.run), send),
            stats: OpStats::default(),
        }
    }

    pub(super) fn phases(call: Box<PhasedCall>) -> Self {
        Detached {
            state: Running::Phases(call),
            stats: OpStats::default(),
        }
    }

    pub(super) fn done() -> Self {
        Self::completed(OpStats::default())
    }

    /// A call that completed before it was detached, having done `stats`.
    pub(super) fn completed(stats: OpStats) -> Self {
        Detached {
            state: Running::Done,
            stats,
        }
    }

    /// What the call did: known once it completed.
    pub(super) fn stats(&self) -> OpStats {
        self.stats
    }
}

impl Communicator {
    /// Starts `call` on registered buffers and detaches it from them.
    pub(super) fn start_detached(
        &mut self,
        call: Call<'_>,
        send: Option<&Buffer>,
        recv: Option<&mut Buffer>,
    ) -> Result<Detached> {
        Ok(self.start_detached_as(call, send, recv)?.0)
    }

    /// Progresses `detached` on the buffers it started on (`wait`: to its end); true once it
    /// is complete.
    pub(super) fn progress_detached(
        &mut self,
        op: &'static str,
        detached: &mut Detached,
        send: Option<&Buffer>,
        recv: Option<&mut Buffer>,
        wait: bool,
    ) -> Result<bool> {
        let Detached { state, stats } = detached;
        match state {
            Running::Done => Ok(true),
            Running::Phases(call) => {
                let mut empty: [u8; 0] = [];
                let out: &mut [u8] = match recv {
                    Some(recv) => &mut recv[..],
                    None => &mut empty,
                };
                self.phases_progress(op, call, out, wait)
            }
            Running::Plan(operation, shape) => {
                let placement = shape.place(send.map(|b| &b.mem), recv.as_deref().map(|b| &b.mem));
                let (transport, owned) = split(self);
                if let (false, Some(running)) = (wait, operation.as_mut()) {
                    if !transport.test(running, placement.views(owned))? {
                        return Ok(false);
                    }
                }
                if let Some(running) = operation.take() {
                    *stats = transport.finish(running, placement.views(owned))?;
                }
                Ok(true)
            }
            Running::Segment(run, part) => {
                let Some(taken) = run.take() else {
                    return Ok(true);
                };
                let mut empty: [u8; 0] = [];
                let send = match *part {
                    SendPart::None => Source::None,
                    SendPart::Send => Source::Send(send.map_or(&[][..], |b| &b[..])),
                    SendPart::InRecv(at, len) => Source::InRecv(at, len),
                };
                let recv: &mut [u8] = match recv {
                    Some(recv) => &mut recv[..],
                    None => &mut empty,
                };
                let mut call = SegmentCall {
                    run: taken,
                    send,
                    recv,
                };
                if !self.segment_progress(op, &mut call, wait)? {
                    *run = Some(call.run);
                    return Ok(false);
                }
                // Counted in the traffic, as a call of its own would be.
                *stats = self.segment_done(&call);
                Ok(true)
            }
        }
    }
}
