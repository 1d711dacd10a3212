//! Jobs whose ranks are threads of this process, given host names so that their communicator
//! sees several nodes.

use circulant::bootstrap::memory::Job;
use circulant::comm::{Communicator, Config};

/// Runs `body` on every rank of a job whose rank r runs on `hosts[r]`, with `config` (its
/// deadline bounds the job's fences too). Every communicator is dropped once all ranks are
/// done: ranks that are threads of one process share libfabric's shm regions, which a rank's
/// endpoint frees when it closes, and a peer may still write into a rank whose call failed.
pub fn run_on_hosts<R: Send>(
    hosts: &[&str],
    config: Config,
    body: impl Fn(&mut Communicator) -> R + Sync,
) -> Vec<R> {
    let job = Job::new(hosts.len())
        .expect("job")
        .timeout(config.deadline)
        .hosts(hosts.iter().copied())
        .expect("one host per rank");
    let done: Vec<(R, Communicator)> = std::thread::scope(|s| {
        let handles: Vec<_> = job
            .bootstraps()
            .into_iter()
            .map(|bootstrap| {
                let (config, body) = (config.clone(), &body);
                s.spawn(move || {
                    let mut comm = Communicator::init_over(bootstrap, config).expect("init");
                    (body(&mut comm), comm)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank did not panic"))
            .collect()
    });
    done.into_iter().map(|(r, _comm)| r).collect()
}

/// [`run_on_hosts`], every rank ending with a barrier (the communicator still works).
pub fn run_on_hosts_to_a_barrier<R: Send>(
    hosts: &[&str],
    config: Config,
    body: impl Fn(&mut Communicator) -> R + Sync,
) -> Vec<R> {
    run_on_hosts(hosts, config, |comm| {
        let r = body(comm);
        comm.barrier().expect("final barrier");
        r
    })
}
