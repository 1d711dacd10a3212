//! Measuring the per-write overhead o of the cost model over the job's own fabric
//! ([`Communicator::measure_write_overhead`]), with the ping-pong probe of
//! [`crate::plan::probe`].

use std::time::Instant;

use crate::fabric::Access::{Local, RemoteWrite};
use crate::plan::{probe, Problem};
use crate::transport::{BufferViews, View};

use super::call::digest;
use super::{CommError, Communicator, Result};

/// The operation's name in messages.
const PROBE_OP: &str = "measure-write-overhead";
/// Writes of the long probe: enough that o shows above the noise of one round trip.
const PROBE_WRITES: usize = 16;
/// Round trips of each probe; the minimum counts.
const PROBE_REPS: usize = 40;

impl Communicator {
    /// Measures LogGP's o, what each further write of a message costs (posting it at the
    /// sender, completing it at the receiver), on this job's fabric between ranks 0 and 1:
    /// the fastest round trip in which rank 0 writes 16 one-byte pieces as 16 writes, less
    /// the fastest with one write, divided by 15 (40 round trips of each, alternating; never
    /// below 0). Collective: every rank must call it, and every rank gets rank 0's value. It
    /// does not change the model; `comm.set_model(CostModel { o, ..comm.model() })` (on every
    /// rank) makes the algorithm choice use it. A single rank returns the model's o. Ranks 0
    /// and 1 often share a node: on a job of several nodes this is o within a node.
    pub fn measure_write_overhead(&mut self) -> Result<f64> {
        let p = self.size();
        if p < 2 {
            return Ok(self.levels.across.o);
        }
        let rank = self.rank();
        let transport = &self.transport;
        let ready = (|| {
            Ok::<_, CommError>((
                transport.prepare(PROBE_OP, probe::ping_pong(rank, 1))?,
                transport.prepare(PROBE_OP, probe::ping_pong(rank, PROBE_WRITES))?,
                transport.alloc(PROBE_WRITES, Local)?,
                transport.alloc(2 * PROBE_WRITES, RemoteWrite)?,
            ))
        })();
        // A rank that cannot take part gives the probe up on every rank at once.
        let (short, long, send, recv) = match ready {
            Ok(ready) => ready,
            Err(err) => {
                self.comm_refused(PROBE_OP, &err);
                return Err(err);
            }
        };
        let mut fastest = [f64::INFINITY; 2];
        for _ in 0..PROBE_REPS {
            for (i, (prepared, writes)) in
                [(&short, 1), (&long, PROBE_WRITES)].into_iter().enumerate()
            {
                let need = prepared.buffers;
                let buffers = BufferViews {
                    send: Some(View::prefix(&send, need.send)),
                    recv: Some(View::prefix(&recv, need.recv)),
                    scratch: None,
                };
                let problem = Problem::Broadcast {
                    p,
                    root: 0,
                    bytes: writes,
                };
                let started = Instant::now();
                let operation = self.transport.start(
                    PROBE_OP,
                    digest(PROBE_OP, "ping-pong", &problem),
                    prepared,
                    buffers,
                )?;
                self.transport.finish(operation, buffers)?;
                fastest[i] = fastest[i].min(started.elapsed().as_secs_f64());
            }
        }
        let mine = ((fastest[1] - fastest[0]) / (PROBE_WRITES - 1) as f64).max(0.0);
        let mut o = mine.to_le_bytes();
        self.bcast(&mut o[..], 0)?;
        Ok(f64::from_le_bytes(o))
    }
}
