//! Which libfabric provider a job uses, and connecting the ranks of a job over it.

use crate::bootstrap::Bootstrap;
use crate::fabric::{Hints, Info};
use crate::plan::CostModel;
use crate::transport::{Card, Opened, Transport};

use super::{CommError, Config, Result};

/// Connects the ranks of the job of `bootstrap`: chooses the provider, opens this rank's
/// endpoint and exchanges the address cards. Returns the transport and the α-β model for the
/// provider.
pub(super) fn connect(
    bootstrap: &mut Bootstrap,
    config: &Config,
) -> Result<(Transport, CostModel)> {
    let (rank, size) = (bootstrap.rank(), bootstrap.size());
    // At most two key-value exchanges: the hosts, unless the launcher tells how many nodes
    // the job spans (the provider depends on it), then each rank's provider with its card.
    let one_host = match bootstrap.nodes() {
        Some(nodes) => nodes == 1,
        None => {
            let hosts = bootstrap.exchange("host", hostname().as_bytes())?;
            hosts.iter().all(|h| *h == hosts[0])
        }
    };
    let info = choose_provider(config, one_host)?;
    let ours = info.provider();
    let opened = Opened::open(&info, rank, size)?;
    // [provider length: 1 byte][provider][card]; provider names are a few bytes long.
    let name = &ours.as_bytes()[..ours.len().min(usize::from(u8::MAX))];
    let card = opened.card()?.to_bytes();
    let mut mine = Vec::with_capacity(1 + name.len() + card.len());
    mine.push(name.len() as u8);
    mine.extend_from_slice(name);
    mine.extend_from_slice(&card);
    let mut cards = Vec::with_capacity(size);
    for (r, entry) in bootstrap.exchange("card", &mine)?.iter().enumerate() {
        let split = entry
            .split_first()
            .filter(|(&n, rest)| rest.len() >= usize::from(n))
            .map(|(&n, rest)| rest.split_at(usize::from(n)));
        match split {
            Some((theirs, card)) if theirs == name => cards.push(Card::from_bytes(card)?),
            _ => {
                let theirs = split.map_or("(an unreadable card)".into(), |(theirs, _)| {
                    String::from_utf8_lossy(theirs).into_owned()
                });
                return Err(CommError::ProviderMismatch {
                    rank: r,
                    theirs,
                    ours,
                });
            }
        }
    }
    let transport = opened.connect(&cards, config.deadline)?;
    Ok((transport, config.model_for(&info.provider())))
}

/// This host's name, to tell whether all ranks share one node.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The provider: the configured one, else `shm` when every rank is on this host, else the
/// first RMA-capable network provider. Network providers are pinned to loopback when every
/// rank is on one host.
fn choose_provider(config: &Config, one_host: bool) -> Result<Info> {
    let query = |name: Option<&str>, loopback: bool| -> Result<Vec<Info>> {
        let mut hints = Hints::rdm_rma();
        hints.auth_key = config.auth_key.clone();
        if let Some(name) = name {
            hints = hints.provider(name);
        }
        if loopback && name != Some("shm") {
            hints = hints.node("127.0.0.1");
        }
        Ok(Info::query(&hints)?
            .into_iter()
            .filter(|i| i.cq_data_size() >= 4)
            .collect())
    };
    if let Some(name) = config.provider.as_deref() {
        let found = query(Some(name), one_host && config.loopback)?;
        return found
            .into_iter()
            .next()
            .ok_or_else(|| CommError::NoProvider(format!(" named {name}")));
    }
    if one_host {
        if let Some(info) = query(Some("shm"), false)?.into_iter().next() {
            return Ok(info);
        }
    }
    query(None, one_host && config.loopback)?
        .into_iter()
        .find(|i| i.provider() != "shm")
        .ok_or_else(|| CommError::NoProvider(String::new()))
}
