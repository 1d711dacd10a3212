//! The model of each level of a job whose nodes hold several ranks: α, β and o measured inside
//! a node (the first of those with the most ranks, on its own ranks, the others idle: nodes are
//! taken to be alike, and nodes that share cores, as emulated ones do, would measure each
//! other's load) and across the nodes (among one rank per node, the others idle, so that no
//! two ranks of a node share its link while it is measured).

use circulant::comm::{CommError, Communicator};
use circulant::plan::{CostModel, LevelCosts, ReduceOp};

use super::measure::{measure_model, Window};

/// Both levels measured where the job's nodes hold several ranks (and there are several
/// nodes); else the one model [`measure_model`] measures, on both levels. Collective.
pub(in crate::cli) fn measure_levels(
    comm: &mut Communicator,
    window: &mut Window,
) -> Result<LevelCosts, CommError> {
    let (p, nodes) = (comm.size(), comm.nodes());
    if nodes <= 1 || nodes == p {
        let model = measure_model(comm, window)?;
        let mut levels = comm.levels();
        levels.across = model;
        if nodes <= 1 {
            levels.inside = model;
        }
        return Ok(levels);
    }
    let largest = (0..nodes)
        .max_by_key(|&v| {
            (
                comm.ranks_on(v).map_or(0, <[usize]>::len),
                std::cmp::Reverse(v),
            )
        })
        .unwrap_or(0);
    let inside = match comm.split((comm.node() == largest).then_some(0), comm.rank() as i64)? {
        Some(mut node) if node.size() > 1 => Some(measure_model(&mut node, &mut Window::new())?),
        _ => None,
    };
    let leader = comm.local_ranks().first() == Some(&comm.rank());
    let across = match comm.split(leader.then_some(0), comm.rank() as i64)? {
        Some(mut leaders) => Some(measure_model(&mut leaders, &mut Window::new())?),
        None => None,
    };
    // The measured node's figures inside; the leaders' across (all leaders measured the same
    // broadcasts, each its own times: the largest).
    let words = |m: Option<CostModel>| m.map_or([0.0; 3], |m| [m.alpha, m.beta, m.o]);
    let mine: Vec<f64> = words(inside).into_iter().chain(words(across)).collect();
    let mut all = [0.0f64; 6];
    comm.allreduce(&mine[..], &mut all[..], ReduceOp::Max)?;
    let model = |w: &[f64]| CostModel {
        alpha: w[0],
        beta: w[1],
        o: w[2],
    };
    Ok(LevelCosts {
        inside: model(&all[..3]),
        across: model(&all[3..]),
    })
}
