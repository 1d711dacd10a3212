//! How a job times its collectives: every repetition started on all ranks at one instant of the
//! common monotonic clock ([`Window`]; the method is described in [`super::measure`]), and the
//! job's α, β and o measured that way ([`measure_model`]).

use std::time::Duration;

use circulant::comm::{Choice, CommError, Communicator, Config, Persistent};
use circulant::plan::{ceil_log2, CostModel, ReduceOp};

/// The common-start timing of `circulant bench`'s method (also the demo's).
pub(in crate::cli) struct Window {
    /// How far ahead rank 0 sets the start, in nanoseconds ([`Window::next_ahead`]).
    ahead_ns: u64,
    /// Repetitions accepted although still late after the window stopped growing.
    pub(super) late: u64,
}

impl Window {
    const FIRST_NS: u64 = 200_000;
    const MOST_NS: u64 = 2_000_000_000;

    pub(in crate::cli) fn new() -> Self {
        Window {
            ahead_ns: Self::FIRST_NS,
            late: 0,
        }
    }

    /// The slowest rank's time of one call on `on` (a communicator, or a persistent request
    /// on one), all ranks started at one instant.
    pub(in crate::cli) fn time<X: OnComm + ?Sized>(
        &mut self,
        on: &mut X,
        call: &mut impl FnMut(&mut X) -> Result<(), CommError>,
    ) -> Result<f64, CommError> {
        loop {
            let mut start = (now_ns() + self.ahead_ns).to_le_bytes();
            on.on_comm()?.bcast(&mut start[..], 0)?;
            let start = u64::from_le_bytes(start);
            let learned = now_ns();
            let late = learned > start;
            // How long after rank 0 set the start this rank learned it.
            let learn_ns = learned.saturating_sub(start.saturating_sub(self.ahead_ns));
            wait_until(start);
            call(on)?;
            let mine = [
                now_ns().saturating_sub(start) as f64 * 1e-9,
                f64::from(u8::from(late)),
                learn_ns as f64,
            ];
            let mut all = [0.0f64; 3];
            on.on_comm()?.allreduce(&mine, &mut all, ReduceOp::Max)?;
            let late = all[1] != 0.0;
            if late && self.ahead_ns >= Self::MOST_NS {
                self.late += 1;
                return Ok(all[0]);
            }
            self.ahead_ns = Self::next_ahead(self.ahead_ns, late, all[2]);
            if !late {
                return Ok(all[0]);
            }
        }
    }

    /// The window after a repetition: doubled (up to 2 s) when a rank learned the start late;
    /// after one on time, shrunk to four times the longest any rank took to learn the start
    /// where that is less (never below 200 µs). Without the shrink one stall of the machine
    /// would keep every later repetition waiting for the window it needed.
    fn next_ahead(ahead_ns: u64, late: bool, longest_learn_ns: f64) -> u64 {
        if late {
            return (ahead_ns * 2).min(Self::MOST_NS);
        }
        let fit = 4.0 * longest_learn_ns;
        if fit < ahead_ns as f64 {
            (fit as u64).max(Self::FIRST_NS)
        } else {
            ahead_ns
        }
    }
}

/// The ranks' monotonic clocks disagree: a common start cannot be set.
#[derive(Debug, thiserror::Error)]
#[error(
    "the ranks' monotonic clocks differ by more than {tolerance_ms} ms: every call is timed \
     from a common start, which needs one clock (ranks on one host, whose processes share it)"
)]
pub(in crate::cli) struct ClockDiffers {
    tolerance_ms: u64,
}

/// Refuses a job whose ranks' monotonic clocks differ by more than 1 ms ([`clock_shared`]):
/// its common start would keep a rank waiting for another host's clock, or time every call
/// late.
pub(in crate::cli) fn require_one_clock(
    comm: &mut Communicator,
) -> Result<(), Box<dyn std::error::Error>> {
    const TOLERANCE_NS: u64 = 1_000_000;
    if clock_shared(comm, TOLERANCE_NS)? {
        Ok(())
    } else {
        Err(ClockDiffers {
            tolerance_ms: TOLERANCE_NS / 1_000_000,
        }
        .into())
    }
}

/// Whether every rank's monotonic clock agrees with rank 0's within `tolerance_ns`, the same
/// answer on every rank. The clock counts from the host's boot: the processes of one host
/// share it, those of several hosts do not. Rank 0 sends its clock and every rank reads its
/// own on receipt (d1 = delay + offset); every rank sends its clock and rank 0 reads its own
/// once all arrived (d2 = delay − offset): the offset lies between −d2 and d1, and the least
/// of eight tries bounds it. The clocks agree where that range meets ±`tolerance_ns`.
fn clock_shared(comm: &mut Communicator, tolerance_ns: u64) -> Result<bool, CommError> {
    let (me, p) = (comm.rank(), comm.size());
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        w
    };
    let mut there = f64::INFINITY;
    let mut back = vec![f64::INFINITY; p];
    let mut clocks = vec![0u8; 8 * p];
    for _ in 0..8 {
        let mut t0 = now_ns().to_le_bytes();
        comm.bcast(&mut t0[..], 0)?;
        there = there.min(now_ns() as f64 - u64::from_le_bytes(t0) as f64);
        let mine = now_ns().to_le_bytes();
        comm.allgather(&mine[..], &mut clocks[..])?;
        if me == 0 {
            let now = now_ns() as f64;
            for (least, clock) in back.iter_mut().zip(clocks.chunks_exact(8)) {
                *least = least.min(now - u64::from_le_bytes(word(clock)) as f64);
            }
        }
    }
    let mut backs: Vec<u8> = back.iter().flat_map(|b| b.to_le_bytes()).collect();
    comm.bcast(&mut backs[..], 0)?;
    let mine = f64::from_le_bytes(word(&backs[8 * me..8 * me + 8]));
    let tolerance = tolerance_ns as f64;
    let agrees = [f64::from(u8::from(
        -mine <= tolerance && there >= -tolerance,
    ))];
    let mut all = [0.0f64];
    comm.allreduce(&agrees, &mut all, ReduceOp::Min)?;
    Ok(all[0] == 1.0)
}

/// What a timed call runs on: a communicator, or a persistent request, which lends its
/// communicator for the window's own collectives between its operations.
pub(in crate::cli) trait OnComm {
    fn on_comm(&mut self) -> Result<&mut Communicator, CommError>;
}

impl OnComm for Communicator {
    fn on_comm(&mut self) -> Result<&mut Communicator, CommError> {
        Ok(self)
    }
}

impl OnComm for Persistent<'_, '_> {
    fn on_comm(&mut self) -> Result<&mut Communicator, CommError> {
        self.comm()
    }
}

/// The monotonic clock (CLOCK_MONOTONIC, common to all processes of one kernel) in ns.
pub(super) fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Sleeps, then yields, until the monotonic clock reaches `t_ns` (no core is spun while
/// ranks may outnumber cores).
fn wait_until(t_ns: u64) {
    loop {
        let now = now_ns();
        if now >= t_ns {
            return;
        }
        let left = t_ns - now;
        if left > 300_000 {
            std::thread::sleep(Duration::from_nanos(left - 200_000));
        } else {
            std::thread::yield_now();
        }
    }
}

/// α and β of this job from binomial broadcasts of 1 byte and 4 MiB, each ⌈log₂ p⌉(α + βm) in
/// the model, timed like the measurements (minimum of 40 and of 5), and o from the write-overhead probe
/// ([`Communicator::measure_write_overhead`]) unless `CIRCULANT_O` sets it. One rank: the
/// configured model.
pub(in crate::cli) fn measure_model(
    comm: &mut Communicator,
    window: &mut Window,
) -> Result<CostModel, CommError> {
    let p = comm.size();
    if p == 1 {
        return Ok(comm.model());
    }
    let rounds = ceil_log2(p) as f64;
    let big_len = 4usize << 20;
    let mut small = comm.alloc(1)?;
    let mut big = comm.alloc(big_len)?;
    let name = Choice::Named("binomial-bcast");
    let (mut t_small, mut t_big) = (f64::INFINITY, f64::INFINITY);
    // The small broadcast is cheap and its minimum the noisier: more repetitions of it.
    for rep in 0..40 {
        t_small = t_small.min(window.time(comm, &mut |c| c.choosing(name).bcast(&mut small, 0))?);
        if rep % 8 == 0 {
            t_big = t_big.min(window.time(comm, &mut |c| c.choosing(name).bcast(&mut big, 0))?);
        }
    }
    let alpha = (t_small / rounds).max(1e-8);
    let beta = ((t_big / rounds - alpha) / big_len as f64).max(1e-13);
    // The broadcasts post one write per message and do not show o: the probe does (on every
    // rank, as it is collective), unless CIRCULANT_O sets it.
    let measured = comm.measure_write_overhead()?;
    let configured = Config::from_env().is_ok_and(|c| c.o.is_some());
    Ok(CostModel {
        alpha,
        beta,
        o: if configured { comm.model().o } else { measured },
    })
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn the_window_doubles_when_late_and_shrinks_after_a_repetition_on_time() {
        let most = Window::MOST_NS;
        assert_eq!(Window::next_ahead(200_000, true, 0.0), 400_000);
        assert_eq!(Window::next_ahead(most / 2 + 1, true, 0.0), most);
        // On time: four times the longest learn, where that is less than the window.
        assert_eq!(Window::next_ahead(3_200_000, false, 150_000.0), 600_000);
        assert_eq!(Window::next_ahead(3_200_000, false, 1_000.0), 200_000);
        assert_eq!(Window::next_ahead(400_000, false, 300_000.0), 400_000);
        assert_eq!(Window::next_ahead(200_000, false, 0.0), 200_000);
    }
}
