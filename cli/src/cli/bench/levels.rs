//! The model of each level of a job whose nodes hold several ranks: α, β and o measured on one
//! pair of ranks per level, the others idle: inside a node on the first two ranks of the first
//! of the nodes with the most ranks, across the nodes on the first ranks of the first two nodes.
//! A pair is what the model's α and β describe (one message between two ranks over one link);
//! what ranks sharing a node's link or cores cost is the model's to price, not the
//! measurement's to absorb (nodes that share cores, as emulated ones do, would otherwise
//! measure each other's load).

use circulant::comm::{CommError, Communicator};
use circulant::plan::{CostModel, LevelCosts, ReduceOp};

use super::timing::{measure_model, Window};

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
    let rank = comm.rank();
    let first_two =
        |ranks: Option<&[usize]>| ranks.is_some_and(|r| r.iter().take(2).any(|&x| x == rank));
    let inside_pair = first_two(comm.ranks_on(largest));
    let inside = measure_pair(comm, inside_pair)?;
    let across_pair = (0..2).any(|v| comm.ranks_on(v).and_then(<[usize]>::first) == Some(&rank));
    let across = measure_pair(comm, across_pair)?;
    // Every rank takes the pairs' figures (the larger of the pair's two ranks' times).
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

/// The model measured on the communicator of the ranks for which `member` holds (two of
/// them), the others idle; `None` on the others. Collective over `comm`.
fn measure_pair(comm: &mut Communicator, member: bool) -> Result<Option<CostModel>, CommError> {
    let key = comm.rank() as i64;
    match comm.split(member.then_some(0), key)? {
        Some(mut pair) if pair.size() > 1 => {
            Ok(Some(measure_model(&mut pair, &mut Window::new())?))
        }
        _ => Ok(None),
    }
}
