//! The transport driving a [`Run`] over the fabric: it sends the ready tokens, posts the
//! writes the run allows, reads the completion queue and tells the run what arrived, and
//! aborts and drains after a failure.
//!
//! Steps 1–5 of docs/architecture.md, section "The one-sided protocol (src/transport)".

use std::time::{Duration, Instant};

use crate::fabric::{
    Completion, Endpoint, FabricError, LocalRange, Post, RemoteRange, RemoteRegion, WriteFlags,
};
use crate::plan::Buf;

use super::eager::{counts_as_local, read_credit_word, Carrier, EagerPost, Sent, CREDIT_CONTEXT};
use super::fabrics::{count, count_memory, Route};
use super::link::Link;
use super::local::{BufferViews, View};
use super::run::{Incoming, Ready, Run};
use super::waiting::{Waiting, DRAIN, WAIT_SLICE};
use super::wire::{wire_seq, Event, Token, TOKEN_BYTES};
use super::{wire, Result, Transport, TransportError};

/// The first and the longest wait of a control write's retry ([`Transport::post_with_retry`]).
const RETRY_FIRST_WAIT: Duration = Duration::from_micros(50);
const RETRY_LONGEST_WAIT: Duration = Duration::from_millis(1);

/// The transport's fabric lent to the eager path for `$run`: the fields it borrows are
/// disjoint from the eager state, which the same step uses.
macro_rules! link {
    ($transport:ident, $run:expr) => {
        Link {
            seq: $run.seq,
            rank: $transport.rank,
            size: $transport.size,
            fabrics: &$transport.fabrics,
            peers: &mut $transport.peers,
            control: &$transport.control,
            deadline: $transport.deadline,
            traffic: &$transport.traffic,
        }
    };
}

impl Transport {
    /// Checks the buffers, runs the setup steps, counts what arrived early and sends the ready
    /// tokens. Returns when posting began: just before the first token, or where a rank that
    /// sends none goes on to post its writes (the end of a call's software overhead).
    pub(super) fn begin(&mut self, run: &mut Run, buffers: &BufferViews<'_>) -> Result<Instant> {
        run.setup(buffers)?;
        run.adopt_early(&mut self.inbox)?;
        let posting = Instant::now();
        // Eager writes of this operation that came before it began: the first pass of
        // posting reads them.
        self.eager.begin();
        // Ready tokens: our buffers are free for this operation from now on.
        if let Some(token) = run.ready_token(buffers) {
            for i in 0..run.writers().len() {
                let writer = run.writers()[i];
                // An eager writer that knows our slots needs no token (it may even have
                // written and ended already).
                let eager = run.eager_from(writer);
                if eager && self.eager.keeps_slots_for(writer) {
                    continue;
                }
                self.reachable(run, writer)?;
                let route = self.peers.route(writer)?;
                let endpoint = self.fabrics.endpoint(route);
                let on_host = self.peers.on_this_host(writer);
                let Some(slots) = self.eager.token_slots(endpoint, writer, eager, on_host)? else {
                    continue;
                };
                // The writer reaches our buffers through its fabric's registrations.
                let token = match route {
                    Route::Network => Token { slots, ..token },
                    Route::Node => Token {
                        slots,
                        recv: reached_through(buffers.recv, endpoint).unwrap_or(token.recv),
                        scratch: reached_through(buffers.scratch, endpoint)
                            .unwrap_or(token.scratch),
                        ..token
                    },
                };
                self.post_with_retry(run, |t| t.post_token(writer, &token))?;
            }
        }
        Ok(posting)
    }

    /// Reads the receive slots that arrived, completes rounds and posts what is allowed,
    /// without reading the completion queue; whether anything happened.
    pub(super) fn post_allowed(
        &mut self,
        run: &mut Run,
        buffers: &BufferViews<'_>,
    ) -> Result<bool> {
        let mut link = link!(self, run);
        let mut progress = self.eager.take(&mut link, buffers, run)?;
        progress |= run.complete_rounds(buffers)?;
        if !run.slot_waiters().is_empty() {
            progress |= self.slots_ran_out(run)?;
        }
        progress |= self.post_ready(run, buffers)?;
        Ok(progress)
    }

    /// One pass without waiting: completes rounds, posts what is allowed, takes the
    /// completions that are there.
    pub(super) fn progress(&mut self, run: &mut Run, buffers: &BufferViews<'_>) -> Result<()> {
        self.post_allowed(run, buffers)?;
        let got = self.fabrics.poll(&mut self.completions);
        if self.forgive_credit_failure(got)? > 0 {
            self.take_completions(run)?;
            self.post_allowed(run, buffers)?;
        }
        Ok(())
    }

    /// Drives `run` until it is done, or its deadline passes with nothing happening.
    pub(super) fn drive(&mut self, run: &mut Run, buffers: &BufferViews<'_>) -> Result<()> {
        // The deadline counts from the wait: a caller may do other work after starting.
        let mut waiting = Waiting::new(&self.fabrics, self.deadline);
        loop {
            let mut progress = self.post_allowed(run, buffers)?;
            if run.done() {
                return Ok(());
            }
            let got = waiting.read(&self.fabrics, &mut self.completions);
            if self.forgive_credit_failure(got)? > 0 {
                progress = true;
                self.take_completions(run)?;
            }
            if waiting.expired(progress) {
                return Err(TransportError::Timeout {
                    op: run.op.to_string(),
                    after: self.deadline,
                    waiting: run.awaited(&self.inbox),
                });
            }
        }
    }

    /// Handles the completions read into `self.completions` and empties it (keeping its
    /// allocation for the next read). After an error the rest are still counted as local
    /// writes done, so that draining does not wait for them; receives consumed by remote CQ
    /// data are posted again.
    fn take_completions(&mut self, run: &mut Run) -> Result<()> {
        let completions = std::mem::take(&mut self.completions);
        let mut outcome = Ok(());
        for c in &completions {
            if outcome.is_ok() {
                outcome = self.take_completion(run, c);
            } else if counts_as_local(c) {
                run.in_flight = run.in_flight.saturating_sub(1);
            }
        }
        self.completions = completions;
        self.completions.clear();
        self.fabrics.replenish()?;
        outcome
    }

    /// Takes in what a completion tells: the eager path's events go to it, the rest to the
    /// run; a token is read from the control region here (from a rank that exists), and the
    /// receive slots it names are learned.
    fn take_completion(&mut self, run: &mut Run, c: &Completion) -> Result<()> {
        if c.context.is_some() {
            if !counts_as_local(c) {
                self.eager.credit_write_done();
                return Ok(());
            }
            return run.on_event(&mut self.inbox, Incoming::LocalDone);
        }
        if !c.is_remote_write_data() {
            return Ok(());
        }
        let Some(data) = c.data else {
            return Ok(());
        };
        let event = match Event::decode(data) {
            Event::Data { seq, round, signal } => Incoming::Data { seq, round, signal },
            Event::Token { from } => {
                let token = if from < self.size {
                    self.take_token(from)
                } else {
                    None
                };
                run.on_event(&mut self.inbox, Incoming::Token { from, token })?;
                if let Some(token) = token {
                    self.eager
                        .learn(from, &token.slots)
                        .map_err(|what| run.protocol(what))?;
                }
                return Ok(());
            }
            Event::Abort { from, seq } => Incoming::Abort { from, seq },
            Event::Slot { from, slot } => {
                return self
                    .eager
                    .slot_arrived(from, slot)
                    .map_err(|what| run.protocol(what));
            }
            Event::Credit { from } => {
                let read = self.read_credit(from);
                self.eager
                    .credit(from, read)
                    .map_err(|what| run.protocol(what))?;
                run.slots_freed(from);
                return Ok(());
            }
            Event::Unknown { from, kind } => Incoming::Unknown { from, kind },
        };
        run.on_event(&mut self.inbox, event)
    }

    /// Posts every transfer whose data is held and whose target is ready, keeping plan order
    /// per target.
    fn post_ready(&mut self, run: &mut Run, buffers: &BufferViews<'_>) -> Result<bool> {
        run.start_scan();
        let mut progress = false;
        while let Some(ready) = run.next_ready(&mut self.inbox, |to| self.eager.knows_slots(to))? {
            progress = true;
            if ready.eager {
                match self.post_eager(run, buffers, &ready)? {
                    EagerPost::Done => run.transfer_posted(),
                    EagerPost::Again => break,
                    EagerPost::NoCredit => run.wait_for_slots(),
                }
                continue;
            }
            if !self.post_transfer(run, buffers, ready)? {
                // The provider's queue is full: progress completions before posting more.
                break;
            }
            run.transfer_posted();
        }
        Ok(progress)
    }

    /// Posts the next receive slots of the ready eager transfer, as many as its target has
    /// free.
    fn post_eager(
        &mut self,
        run: &mut Run,
        buffers: &BufferViews<'_>,
        ready: &Ready,
    ) -> Result<EagerPost> {
        let (transfer, cursor) = run.eager_transfer(ready);
        let to = transfer.to;
        let mut sent = Sent::at(cursor);
        let mut link = link!(self, run);
        let posted = self.eager.post(&mut link, &transfer, buffers, &mut sent);
        // What went is recorded also after a failure: its writes are drained.
        run.slots_posted(&sent);
        match self.eager.carrier_to(to) {
            Some(Carrier::Memory) => count_memory(&self.traffic, sent.slots, sent.bytes),
            _ => {
                if let Ok(route) = self.peers.route(to) {
                    count(&self.traffic, route, sent.slots, sent.bytes);
                }
            }
        }
        posted
    }

    /// Whether slots of targets through shared memory were freed for transfers that wait for
    /// them (woken, to be posted again); a target among them that has ended is an error.
    fn slots_ran_out(&mut self, run: &mut Run) -> Result<bool> {
        let link = link!(self, run);
        let mut woken = false;
        let mut k = 0;
        while let Some(&to) = run.slot_waiters().get(k) {
            if self.eager.look_for_free_slots(&link, &run.op, to)? {
                run.slots_freed(to);
                woken = true;
            } else {
                k += 1;
            }
        }
        Ok(woken)
    }

    /// What reading the completion queue came to, with the failure of a credit word's write
    /// forgiven: its writer may have finished its last operation and ended, which is no
    /// failure of this one (over shm the liveness check skips such a writer; other providers
    /// tell it only by the failed write).
    pub(super) fn forgive_credit_failure(
        &mut self,
        got: std::result::Result<usize, FabricError>,
    ) -> Result<usize> {
        match got {
            Err(FabricError::Completion {
                context: Some(CREDIT_CONTEXT),
                ..
            }) => {
                self.eager.credit_write_done();
                Ok(0)
            }
            other => Ok(other?),
        }
    }

    /// Waits a little for credit words still in flight, so that the endpoint never closes with
    /// them posted (no operation waits for them).
    pub(super) fn drain_credit_writes(&mut self) {
        let deadline = Instant::now() + DRAIN;
        while self.eager.credit_writes() > 0 && Instant::now() < deadline {
            match self.fabrics.wait(&mut self.completions, WAIT_SLICE) {
                Ok(_) => {
                    for c in &self.completions {
                        if c.context == Some(CREDIT_CONTEXT) {
                            self.eager.credit_write_done();
                        }
                    }
                    self.completions.clear();
                }
                Err(FabricError::Completion {
                    context: Some(CREDIT_CONTEXT),
                    ..
                }) => self.eager.credit_write_done(),
                Err(_) => {}
            }
        }
    }

    /// The count of the credit word `from` wrote into our control region (`None` if it is
    /// torn or cannot be read).
    fn read_credit(&self, from: usize) -> Option<u32> {
        let mut word = [0u8; wire::CREDIT_BYTES];
        self.control
            .read(wire::credit_in(self.size, from), &mut word)
            .ok()?;
        read_credit_word(&word)
    }

    /// Posts the remaining writes of the ready transfer (its merged writes, see [`Prepared`]);
    /// false if the provider asked to retry later. Every write but the last of what this pass
    /// posts goes with `FI_MORE`: the transfer's own writes but its last, and its last if
    /// another zero-copy transfer is ready to follow ([`Run::more_ready`]); a write without
    /// the flag lets the provider send what it batched.
    ///
    /// [`Prepared`]: super::Prepared
    fn post_transfer(
        &mut self,
        run: &mut Run,
        buffers: &BufferViews<'_>,
        ready: Ready,
    ) -> Result<bool> {
        let event = Event::Data {
            seq: wire_seq(run.seq),
            round: ready.round,
            signal: ready.signal,
        };
        self.peers.reachable(&run.op, ready.to, self.deadline)?;
        let peer = self.peers.address(ready.to)?;
        let route = self.peers.route(ready.to)?;
        let endpoint = self.fabrics.endpoint(route);
        // The first write follows that check at once; later ones are checked again.
        let mut checked = true;
        let writes = run.plan_writes();
        let mut local: Vec<LocalRange<'_>> = Vec::new();
        let mut remote: Vec<RemoteRange> = Vec::new();
        while let Some((index, last)) = run.next_write() {
            let write = &writes[index];
            let len = write.bytes();
            let post = if len == 0 {
                if !std::mem::take(&mut checked) {
                    self.peers.reachable(&run.op, ready.to, self.deadline)?;
                }
                self.post_signal(ready.to, event)?
            } else {
                let token = ready
                    .token
                    .ok_or_else(|| run.protocol("a write without a token".into()))?;
                local.clear();
                for seg in &write.local {
                    let src = buffers.view(&run.op, seg.buf)?;
                    local.push(src.mem.range(src.offset + seg.offset, seg.len)?);
                }
                remote.clear();
                for seg in &write.remote {
                    let target = match seg.buf {
                        Buf::Recv => token.recv,
                        Buf::Scratch => token.scratch,
                        Buf::Send => {
                            return Err(run.protocol("a write into a send buffer".into()));
                        }
                    };
                    remote.push(
                        target
                            .range(seg.offset as u64, seg.len as u64)
                            .map_err(|_| TransportError::Mismatch {
                                op: run.op.to_string(),
                                peer: ready.to,
                            })?,
                    );
                }
                let flags = if !last || run.more_ready(&self.inbox) {
                    WriteFlags::MORE
                } else {
                    WriteFlags::NONE
                };
                if !std::mem::take(&mut checked) {
                    self.peers.reachable(&run.op, ready.to, self.deadline)?;
                }
                endpoint.write_msg(&local, peer, &remote, Some(event.encode()), flags, run.seq)?
            };
            match post {
                Post::Posted => {
                    // A signal was counted as a control write.
                    if len > 0 {
                        count(&self.traffic, route, 1, len);
                    }
                    run.write_posted(len)
                }
                Post::Again => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Posts a control write, progressing the queue while the provider asks to retry. The
    /// retry does not wait for a completion: what the provider waits for may complete nothing
    /// (shm meets a peer for the first time in the progress of both endpoints), so each wait
    /// is short, growing from [`RETRY_FIRST_WAIT`] to [`RETRY_LONGEST_WAIT`].
    fn post_with_retry(
        &mut self,
        run: &mut Run,
        mut post: impl FnMut(&Transport) -> Result<Post>,
    ) -> Result<()> {
        let deadline = Instant::now() + self.deadline;
        let mut wait = RETRY_FIRST_WAIT;
        loop {
            if post(self)? == Post::Posted {
                run.in_flight += 1;
                return Ok(());
            }
            let got = self.fabrics.wait(&mut self.completions, wait);
            wait = (wait * 2).min(RETRY_LONGEST_WAIT);
            let n = self.forgive_credit_failure(got)?;
            if n > 0 {
                self.take_completions(run)?;
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Timeout {
                    op: run.op.to_string(),
                    after: self.deadline,
                    waiting: "for room in the provider's transmit queue".into(),
                });
            }
        }
    }

    /// Tells every other rank whose card is known that `run` failed here (see
    /// [`Transport::fetch_cards_to_abort`]). A full transmit queue is progressed and
    /// the abort posted again, for as long as draining would wait.
    pub(super) fn abort_all(&mut self, run: &mut Run) {
        let event = Event::Abort {
            from: self.rank,
            seq: wire::abort_seq(run.abort_seq),
        };
        let deadline = Instant::now() + DRAIN;
        let (rank, size) = (self.rank, self.size);
        for peer in (0..size).filter(|&peer| peer != rank) {
            loop {
                // A write to a peer that has ended could spin forever (see `liveness`).
                if self.peers.ended_now(peer) || !self.peers.known(peer) {
                    break;
                }
                match self.post_signal(peer, event) {
                    Ok(Post::Posted) => {
                        run.in_flight += 1;
                        break;
                    }
                    Ok(Post::Again) if Instant::now() < deadline => self.reap(run),
                    // Best effort: a peer that is gone cannot be told.
                    _ => break,
                }
            }
        }
    }

    /// Waits a slice for completions after a failure, counting only our own writes.
    fn reap(&mut self, run: &mut Run) {
        match self.fabrics.wait(&mut self.completions, WAIT_SLICE) {
            Ok(_) => {
                let done = self
                    .completions
                    .iter()
                    .filter(|c| counts_as_local(c))
                    .count();
                run.in_flight = run.in_flight.saturating_sub(done);
                self.completions.clear();
            }
            // A failed write is a completed one.
            Err(_) => run.in_flight = run.in_flight.saturating_sub(1),
        }
    }

    /// After a failure: waits a little for our own writes, so that no write that reads the
    /// operation's buffers is still in flight (the regions stay alive until their writes
    /// complete in any case). False if some never completed.
    pub(super) fn drain(&mut self, run: &mut Run) -> bool {
        let deadline = Instant::now() + DRAIN;
        while run.in_flight > 0 && Instant::now() < deadline {
            self.reap(run);
        }
        run.in_flight == 0
    }

    /// Fetches the peer's card if it is not known yet, and refuses a write to a peer whose
    /// process has ended (see `liveness`).
    pub(super) fn reachable(&mut self, run: &Run, peer: usize) -> Result<()> {
        self.peers.reachable(&run.op, peer, self.deadline)
    }

    /// A zero-length write into `peer`'s control region carrying `event`.
    fn post_signal(&self, peer: usize, event: Event) -> Result<Post> {
        self.post_control(peer, 0, 0, 0, event)
    }

    fn post_token(&self, peer: usize, token: &Token) -> Result<Post> {
        let out = (self.size + peer) * TOKEN_BYTES;
        self.control.store(out, &token.to_bytes())?;
        let event = Event::Token { from: self.rank };
        self.post_control(peer, out, self.rank * TOKEN_BYTES, TOKEN_BYTES, event)
    }

    /// Writes `len` bytes at `from` of our control region to `at` of `peer`'s, carrying
    /// `event`.
    fn post_control(
        &self,
        peer: usize,
        from: usize,
        at: usize,
        len: usize,
        event: Event,
    ) -> Result<Post> {
        let local = self.control.range(from, len)?;
        let remote = self.peers.control(peer)?.range(at as u64, len as u64)?;
        let route = self.peers.route(peer)?;
        let post = self.fabrics.endpoint(route).write(
            local,
            self.peers.address(peer)?,
            remote,
            Some(event.encode()),
            0,
        )?;
        if post == Post::Posted {
            count(&self.traffic, route, 1, 0);
        }
        Ok(post)
    }

    /// Reads the token `from` just wrote into our control region.
    fn take_token(&mut self, from: usize) -> Option<Token> {
        let mut bytes = [0u8; TOKEN_BYTES];
        self.control.read(from * TOKEN_BYTES, &mut bytes).ok()?;
        Token::from_bytes(&bytes)
    }
}

/// What a writer reached through `endpoint` needs to write into `view`.
fn reached_through(view: Option<View<'_>>, endpoint: &Endpoint) -> Option<RemoteRegion> {
    view.and_then(|v| v.remote_for(endpoint))
}
