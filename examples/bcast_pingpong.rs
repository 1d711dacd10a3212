//! One-way latency of a small broadcast between two ranks, measured as a ping-pong: ranks 0
//! and 1 broadcast in turn (root 0, then root 1), so each broadcast starts as soon as the
//! previous one arrived, with warm caches and no common start. Prints the mean time of one
//! broadcast on rank 0. FORM is `blocking` (the default), `nonblocking` (`ibcast` and
//! `wait`) or `persistent` (two requests, one per root, made before the loop; as a request
//! borrows its communicator, the second runs on a copy of it, so this form alternates two
//! communicators where the others use one).
//!
//! ```sh
//! cargo build --release --example bcast_pingpong
//! circulant run -n 2 --provider shm -- target/release/examples/bcast_pingpong [ROUNDS] [BYTES] [FORM]
//! ```
//!
//! Pinning the two ranks to different cores steadies the figure:
//! `-- sh -c 'exec taskset -c $PMI_RANK target/release/examples/bcast_pingpong'`.

use std::error::Error;
use std::time::Instant;

use circulant::comm::{Buffer, Communicator};

type Outcome = Result<(), Box<dyn Error>>;

fn main() -> Outcome {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let bytes: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let form = args.next().unwrap_or_else(|| "blocking".into());
    if !["blocking", "nonblocking", "persistent"].contains(&form.as_str()) {
        return Err(format!("unknown form {form:?}: blocking, nonblocking or persistent").into());
    }
    let mut comm = Communicator::init()?;
    if comm.size() < 2 {
        return Err("run it with two ranks or more: circulant run -n 2 -- ...".into());
    }
    let mut buf = comm.alloc(bytes)?;
    let each = match form.as_str() {
        "blocking" => timed(rounds, &mut || {
            comm.bcast(&mut buf, 0)?;
            comm.bcast(&mut buf, 1)?;
            Ok(())
        })?,
        "nonblocking" => timed(rounds, &mut || {
            comm.ibcast(&mut buf, 0)?.wait()?;
            comm.ibcast(&mut buf, 1)?.wait()?;
            Ok(())
        })?,
        "persistent" => persistent(&mut comm, &mut buf, rounds)?,
        other => return Err(format!("unknown form {other:?}").into()),
    };
    if comm.rank() == 0 {
        println!(
            "bcast of {bytes} B, p = {}, {}, {form}: {:.3} us per broadcast ({rounds} round trips)",
            comm.size(),
            comm.provider(),
            each * 1e6
        );
    }
    Ok(())
}

/// Two persistent broadcasts (root 0 and root 1) on two buffers: a request borrows its
/// communicator, so the second runs on a copy of it (a split with one color).
fn persistent(
    comm: &mut Communicator,
    buf: &mut Buffer,
    rounds: usize,
) -> Result<f64, Box<dyn Error>> {
    let key = comm.rank() as i64;
    let mut other = comm
        .split(Some(0), key)?
        .ok_or("the split left this rank out")?;
    let mut buf1 = other.alloc(buf.len())?;
    let mut from0 = comm.bcast_init(buf, 0)?;
    let mut from1 = other.bcast_init(&mut buf1, 1)?;
    timed(rounds, &mut || {
        from0.run()?;
        from1.run()?;
        Ok(())
    })
}

/// Seconds per broadcast of `round_trip` (two broadcasts), after up to 1000 untimed ones.
fn timed(rounds: usize, round_trip: &mut dyn FnMut() -> Outcome) -> Result<f64, Box<dyn Error>> {
    for _ in 0..rounds.min(1000) {
        round_trip()?;
    }
    let started = Instant::now();
    for _ in 0..rounds {
        round_trip()?;
    }
    Ok(started.elapsed().as_secs_f64() / (2 * rounds.max(1)) as f64)
}
