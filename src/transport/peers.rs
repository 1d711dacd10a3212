//! The peers' addresses and control regions, known from the start or fetched when an operation
//! first writes to a peer.
//!
//! Where the job's key-value space answers every get with a request to one server (PMI-1), a
//! rank that read every card at start would make p requests, O(p²) at the server. A [`Peers`]
//! built with a [`CardSource`] instead knows only this rank's own card at first and asks the
//! source for a peer's card the first time a plan writes to that peer (data, a ready token or
//! a signal); a broadcast over a tree then fetches the cards of the parent and the children
//! only. An abort must reach every rank, so a failing rank fetches the cards still missing
//! (see [`Peers::resolve_all`]).

use std::error::Error;
use std::time::{Duration, Instant};

use crate::fabric::{Address, AddressVector, RemoteRegion};
use crate::plan::merge::IovLimits;

use super::card::Card;
use super::error::{Result, TransportError};
use super::fabrics::Route;
use super::liveness::PeerProcesses;

/// Where the cards of peers not known yet come from (the job's key-value space).
pub trait CardSource: Send {
    /// The card `rank` published at start, read before `deadline` or failing: a source whose
    /// server does not answer must return an error by then, never block longer.
    fn card(
        &mut self,
        rank: usize,
        deadline: Instant,
    ) -> std::result::Result<Card, Box<dyn Error + Send + Sync>>;
}

/// What a rank needs to write to a peer.
#[derive(Clone, Copy, Debug)]
struct Peer {
    address: Address,
    control: RemoteRegion,
    route: Route,
}

/// Where peers' addresses are inserted, and which peers share this rank's node.
pub(crate) struct Tables {
    /// The network fabric's address vector.
    pub network: AddressVector,
    /// The node fabric's, where the transport has one.
    pub node: Option<AddressVector>,
    /// Per rank, whether it shares this rank's node: reached through the node fabric where
    /// there is one and its card has a node part, and its process watched.
    pub mates: Vec<bool>,
    /// Whether every peer's process is watched (every rank on this host, as under shm).
    pub watch_all: bool,
}

/// The table of every rank's address and control region, this rank's included.
pub(crate) struct Peers {
    tables: Tables,
    rank: usize,
    known: Vec<Option<Peer>>,
    /// The peers' processes, where they can be watched: each is watched from the moment its
    /// card is known.
    processes: PeerProcesses,
    /// Cards not known yet come from here; `None` once every card is known.
    source: Option<Box<dyn CardSource>>,
    /// Cards fetched from the source so far.
    fetched: usize,
    /// The limits of merged writes this rank uses, which every card must name.
    iov: IovLimits,
}

impl Peers {
    /// Every rank's card known at once (`cards` in rank order).
    pub fn all(tables: Tables, rank: usize, cards: &[Card]) -> Result<Peers> {
        let own = cards.get(rank).ok_or_else(|| TransportError::Invalid {
            op: "connect".into(),
            what: format!("no address card for rank {rank} of {}", cards.len()),
        })?;
        let mut peers = Peers::empty(tables, rank, cards.len(), None, own.iov);
        for (r, card) in cards.iter().enumerate() {
            peers.learn(r, card)?;
        }
        Ok(peers)
    }

    /// Only this rank's own card known; the others are fetched from `source` when needed.
    pub fn lazy(
        tables: Tables,
        rank: usize,
        size: usize,
        own: &Card,
        source: Box<dyn CardSource>,
    ) -> Result<Peers> {
        let mut peers = Peers::empty(tables, rank, size, Some(source), own.iov);
        peers.learn(rank, own)?;
        Ok(peers)
    }

    fn empty(
        tables: Tables,
        rank: usize,
        size: usize,
        source: Option<Box<dyn CardSource>>,
        iov: IovLimits,
    ) -> Peers {
        Peers {
            tables,
            rank,
            known: vec![None; size],
            processes: PeerProcesses::none(size),
            source,
            fetched: 0,
            iov,
        }
    }

    /// Makes `rank`'s address known, fetching its card within `within` if it is not yet.
    /// `op` names the operation for the error.
    pub fn resolve(&mut self, op: &str, rank: usize, within: Duration) -> Result<()> {
        if self.known.get(rank).is_some_and(Option::is_some) {
            return Ok(());
        }
        // Read the clock only for a card that must be fetched.
        self.resolve_by(op, rank, Instant::now() + within)
    }

    /// [`Self::resolve`] with a deadline.
    fn resolve_by(&mut self, op: &str, rank: usize, deadline: Instant) -> Result<()> {
        if self.known.get(rank).is_some_and(Option::is_some) {
            return Ok(());
        }
        let unreachable = |source| TransportError::Unreachable {
            op: op.to_string(),
            peer: rank,
            source,
        };
        if rank >= self.known.len() {
            return Err(unreachable(
                format!("there are only {} ranks", self.known.len()).into(),
            ));
        }
        let Some(source) = self.source.as_mut() else {
            return Err(unreachable("its address card is not known".into()));
        };
        let card = source.card(rank, deadline).map_err(unreachable)?;
        self.fetched += 1;
        self.learn(rank, &card)
    }

    /// Makes `peer`'s address known (as [`Self::resolve`]) and refuses a write to a peer
    /// whose process has ended (see `liveness`).
    pub fn reachable(&mut self, op: &str, peer: usize, within: Duration) -> Result<()> {
        self.resolve(op, peer, within)?;
        if self.ended(peer) {
            return Err(TransportError::Exited {
                op: op.to_string(),
                peer,
            });
        }
        Ok(())
    }

    /// Fetches every card not known yet, for as long as `deadline` allows and the source
    /// answers; best effort (an abort goes to the ranks that can be reached).
    pub fn resolve_all(&mut self, deadline: Instant) {
        for rank in 0..self.known.len() {
            if Instant::now() >= deadline {
                return;
            }
            // A rank whose card cannot be read is not told; a source that failed on a
            // server that does not answer fails at once for the rest.
            let _ = self.resolve_by("abort", rank, deadline);
        }
    }

    /// Inserts `rank`'s card. A card whose limits of merged writes differ from this rank's is
    /// an error; the peer is still inserted, so that an abort reaches it.
    fn learn(&mut self, rank: usize, card: &Card) -> Result<()> {
        let mate = self.tables.mates.get(rank).copied().unwrap_or(false);
        let peer = match (&self.tables.node, &card.node) {
            (Some(av), Some(node)) if mate => Peer {
                address: av.insert(&node.name)?,
                control: node.control,
                route: Route::Node,
            },
            _ => Peer {
                address: self.tables.network.insert(&card.name)?,
                control: card.control,
                route: Route::Network,
            },
        };
        if (self.tables.watch_all || mate) && rank != self.rank {
            self.processes.watch_one(rank, card.pid);
        }
        self.known[rank] = Some(peer);
        if self.known.iter().all(Option::is_some) {
            // Every card is known: the source (and what it holds on to) is not needed again.
            self.source = None;
        }
        if card.iov != self.iov {
            return Err(TransportError::IovMismatch {
                rank: self.rank,
                ours: self.iov,
                peer: rank,
                theirs: card.iov,
            });
        }
        Ok(())
    }

    fn peer(&self, rank: usize) -> Result<Peer> {
        self.known
            .get(rank)
            .copied()
            .flatten()
            .ok_or_else(|| TransportError::Invalid {
                op: "write".into(),
                what: format!("rank {rank}'s address is not known"),
            })
    }

    /// The address of a peer made known by [`Self::resolve`].
    pub fn address(&self, rank: usize) -> Result<Address> {
        Ok(self.peer(rank)?.address)
    }

    /// The fabric that reaches a peer made known by [`Self::resolve`].
    pub fn route(&self, rank: usize) -> Result<Route> {
        Ok(self.peer(rank)?.route)
    }

    /// Whether `rank` is known to share this rank's host (so its process is watched and
    /// memory can be shared with it): every rank under shm, the ranks of this node otherwise.
    pub fn on_this_host(&self, rank: usize) -> bool {
        self.tables.watch_all || self.tables.mates.get(rank).copied().unwrap_or(false)
    }

    /// The control region of a peer made known by [`Self::resolve`].
    pub fn control(&self, rank: usize) -> Result<RemoteRegion> {
        Ok(self.peer(rank)?.control)
    }

    /// Whether `rank`'s process is known to have ended (see `liveness`).
    pub fn ended(&self, rank: usize) -> bool {
        self.processes.ended(rank)
    }

    /// Whether `rank`'s process has ended, asked now (see `liveness`).
    pub fn ended_now(&self, rank: usize) -> bool {
        self.processes.ended_now(rank)
    }

    /// Whether `rank`'s card is known.
    pub fn known(&self, rank: usize) -> bool {
        self.known.get(rank).is_some_and(Option::is_some)
    }

    /// Cards fetched from the source so far.
    pub fn fetched(&self) -> usize {
        self.fetched
    }
}
