//! One-way latency of a small broadcast between two ranks, measured as a ping-pong: ranks 0
//! and 1 broadcast in turn (root 0, then root 1), so each broadcast starts as soon as the
//! previous one arrived, with warm caches and no common start. Prints the mean time of one
//! broadcast on rank 0.
//!
//! ```sh
//! cargo build --release --example bcast_pingpong
//! circulant run -n 2 --provider shm -- target/release/examples/bcast_pingpong [ROUNDS] [BYTES]
//! ```
//!
//! Pinning the two ranks to different cores steadies the figure:
//! `-- sh -c 'exec taskset -c $PMI_RANK target/release/examples/bcast_pingpong'`.

use std::error::Error;
use std::time::Instant;

use circulant::comm::Communicator;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let bytes: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let mut comm = Communicator::init()?;
    if comm.size() < 2 {
        return Err("run it with two ranks or more: circulant run -n 2 -- ...".into());
    }
    let mut buf = comm.alloc(bytes)?;
    let mut round_trip = |comm: &mut Communicator| -> Result<(), Box<dyn Error>> {
        comm.bcast(&mut buf, 0)?;
        comm.bcast(&mut buf, 1)?;
        Ok(())
    };
    for _ in 0..rounds.min(1000) {
        round_trip(&mut comm)?;
    }
    let started = Instant::now();
    for _ in 0..rounds {
        round_trip(&mut comm)?;
    }
    let each = started.elapsed().as_secs_f64() / (2 * rounds.max(1)) as f64;
    if comm.rank() == 0 {
        println!(
            "bcast of {bytes} B, p = {}, {}: {:.3} us per broadcast ({rounds} round trips)",
            comm.size(),
            comm.provider(),
            each * 1e6
        );
    }
    Ok(())
}
