//! Setting a transport up: an endpoint opened with its control region, the card a rank
//! publishes so that others can reach it, and connecting to the ranks' cards: all of them at
//! once, or each when first needed (`peers`).

use std::time::Duration;

use crate::fabric::Access::RemoteWrite;
use crate::fabric::{AddressVector, CompletionQueue, Domain, Endpoint, Info, RegisteredMemory};

use crate::plan::merge::IovLimits;

use super::card::{Card, NodeCard};
use super::eager::Eager;
use super::error::{Result, TransportError};
use super::fabrics::{Fabric, Fabrics};
use super::peers::{CardSource, Peers, Tables};
use super::prepared::Limits;
use super::run::Inbox;
use super::wire;
use super::Transport;

/// An endpoint opened and its control region registered, before the peers are known.
pub struct Opened {
    network: Fabric,
    node: Option<Fabric>,
    control: RegisteredMemory,
    rank: usize,
    size: usize,
    iov: IovLimits,
    /// Whether some peer runs on another node (known with the node map; until then, true).
    across: bool,
}

/// Opens one fabric on `info` for `size` ranks.
fn open_fabric(info: &Info, size: usize) -> Result<Fabric> {
    if info.provider() == "shm" {
        crate::fabric::shm::remove_stale_regions_of_this_pid();
    }
    let domain = Domain::open(info)?;
    let depth = info.tx_size().max(info.rx_size()).clamp(256, 1 << 16);
    let cq = CompletionQueue::open(&domain, depth)?;
    let av = AddressVector::open(&domain, size)?;
    let endpoint = Endpoint::open(&domain, &av, &cq, &cq)?;
    Ok(Fabric { endpoint, cq, av })
}

impl Opened {
    /// Opens an endpoint on `info` for rank `rank` of `size`, and one on `node` for the ranks
    /// of this node where it is given (see `fabrics`).
    pub fn open(info: &Info, node: Option<&Info>, rank: usize, size: usize) -> Result<Opened> {
        if size == 0 || rank >= size || size as u64 > wire::MAX_FIELD {
            return Err(TransportError::Invalid {
                op: "open".into(),
                what: format!("rank {rank} of {size} ranks is not supported"),
            });
        }
        for info in std::iter::once(info).chain(node) {
            if info.cq_data_size() < 4 {
                return Err(TransportError::Invalid {
                    op: "open".into(),
                    what: format!(
                        "provider {} carries {} bytes of remote CQ data; 4 are needed",
                        info.provider(),
                        info.cq_data_size()
                    ),
                });
            }
        }
        let network = open_fabric(info, size)?;
        let node = node.map(|node| open_fabric(node, size)).transpose()?;
        // Incoming token slots (one per peer), outgoing ones (the source of our tokens), then
        // the same for eager credit words; reached through either fabric.
        let endpoints: Vec<&Endpoint> = std::iter::once(&network.endpoint)
            .chain(node.as_ref().map(|f| &f.endpoint))
            .collect();
        let control =
            RegisteredMemory::for_endpoints(&endpoints, wire::control_bytes(size), RemoteWrite)?;
        // The limits of merged writes are the network provider's: a caller whose job may
        // reach some pairs through a node fabric lowers them to that provider's on every rank
        // (`cap_iov`), so that all ranks merge alike whichever fabric carries a pair.
        Ok(Opened {
            network,
            node,
            control,
            rank,
            size,
            iov: provider_iov_limits(info),
            across: true,
        })
    }

    /// Lowers the limits of merged writes to `cap` where it is smaller (the configured
    /// `CIRCULANT_IOV_LIMIT`, or a parent communicator's limits); before [`Self::card`].
    pub fn cap_iov(mut self, cap: Option<IovLimits>) -> Opened {
        if let Some(cap) = cap {
            self.iov = self.iov.min(cap);
        }
        self
    }

    /// What the other ranks need to reach this one.
    pub fn card(&self) -> Result<Card> {
        let node = match &self.node {
            Some(node) => Some(NodeCard {
                name: node.endpoint.name()?,
                control: self.control.remote_for(&node.endpoint).ok_or_else(|| {
                    TransportError::Invalid {
                        op: "open".into(),
                        what: "the control region is not registered with the node fabric".into(),
                    }
                })?,
            }),
            None => None,
        };
        Ok(Card {
            name: self.network.endpoint.name()?,
            control: self.control.remote(),
            pid: std::process::id(),
            iov: self.iov,
            node,
        })
    }

    /// Inserts every rank's card (in rank order) and returns the ready transport. `mates`
    /// says which ranks share this rank's node: those whose card has a node part are reached
    /// through the node fabric (empty: none).
    pub fn connect(self, cards: &[Card], mates: &[bool], deadline: Duration) -> Result<Transport> {
        if cards.len() != self.size {
            return Err(TransportError::Invalid {
                op: "connect".into(),
                what: format!("{} address cards for {} ranks", cards.len(), self.size),
            });
        }
        let this = self.node_if_needed(mates);
        let peers = Peers::all(this.tables(mates), this.rank, cards)?;
        Ok(this.into_transport(peers, deadline))
    }

    /// Returns the ready transport knowing only this rank's own card: the card of a peer is
    /// fetched from `source` when an operation first writes to it. `mates` as in
    /// [`Self::connect`].
    pub fn connect_lazily(
        self,
        source: Box<dyn CardSource>,
        mates: &[bool],
        deadline: Duration,
    ) -> Result<Transport> {
        let this = self.node_if_needed(mates);
        let own = this.card()?;
        let peers = Peers::lazy(this.tables(mates), this.rank, this.size, &own, source)?;
        Ok(this.into_transport(peers, deadline))
    }

    /// Closes the node fabric where no other rank shares this one's node (it was opened
    /// before the node map was known): its card part is then never used. Notes whether some
    /// peer runs on another node.
    fn node_if_needed(mut self, mates: &[bool]) -> Opened {
        let rank = self.rank;
        if !mates.iter().enumerate().any(|(r, &m)| m && r != rank) {
            self.node = None;
        }
        self.across = some_peer_across(rank, self.size, mates);
        self
    }

    /// Where the peers' addresses go, and which peers are watched: every shm peer shares this
    /// host, as do the ranks of this node.
    fn tables(&self, mates: &[bool]) -> Tables {
        let all_here = self.network.endpoint.info().provider() == "shm";
        Tables {
            network: self.network.av.clone(),
            node: self.node.as_ref().map(|f| f.av.clone()),
            mates: (0..self.size)
                .map(|r| mates.get(r).copied().unwrap_or(false))
                .collect(),
            watch_all: all_here,
        }
    }

    fn into_transport(self, peers: Peers, deadline: Duration) -> Transport {
        // The smaller cap of the two providers (0: none).
        let limits = Limits {
            max_msg_size: std::iter::once(&self.network)
                .chain(self.node.as_ref())
                .map(|f| f.endpoint.info().max_msg_size())
                .filter(|&cap| cap > 0)
                .min()
                .unwrap_or(0),
        };
        Transport {
            rank: self.rank,
            size: self.size,
            fabrics: Fabrics::new(self.network, self.node, self.across),
            control: self.control,
            peers,
            seq: 0,
            inbox: Inbox::new(self.size),
            eager: Eager::new(self.size),
            limits,
            iov: self.iov,
            deadline,
            copied: 0,
            traffic: Default::default(),
            broken: None,
            segment: None,
            active: None,
            completions: Vec::with_capacity(64),
            spare: Default::default(),
        }
    }
}

/// Whether some rank of `size` other than `rank` runs on another node: one that `mates` (this
/// rank's node map, true for the ranks of its node) does not mark.
fn some_peer_across(rank: usize, size: usize, mates: &[bool]) -> bool {
    (0..size).any(|r| r != rank && !mates.get(r).copied().unwrap_or(false))
}

/// The provider's limits of one write: `iov_limit` local and `rma_iov_limit` remote segments
/// (a provider that reports 0 is taken to allow 1) and `max_msg_size` bytes (0: no cap).
pub fn provider_iov_limits(info: &Info) -> IovLimits {
    IovLimits {
        iov: info.iov_limit().max(1),
        rma_iov: info.rma_iov_limit().max(1),
        max_bytes: usize::MAX,
    }
    .with_max_bytes(info.max_msg_size())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_waits_across_nodes_only_where_a_peer_runs_on_another() {
        // 2 nodes x 2: rank 1 shares its node with rank 0 only.
        assert!(some_peer_across(1, 4, &[true, true, false, false]));
        // A communicator of one node's ranks (a split), or one whose map is not known yet
        // (every rank marked a mate of every other).
        assert!(!some_peer_across(1, 2, &[true, true]));
        assert!(!some_peer_across(0, 3, &[true, true, true]));
        // A map shorter than the job leaves the others across.
        assert!(some_peer_across(0, 3, &[true, true]));
        assert!(!some_peer_across(0, 1, &[true]));
    }
}
