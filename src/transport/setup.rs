//! Setting a transport up: an endpoint opened with its control region, the card a rank
//! publishes so that others can reach it, and connecting to the ranks' cards: all of them at
//! once, or each when first needed (`peers`).

use std::time::Duration;

use crate::fabric::Access::RemoteWrite;
use crate::fabric::{
    AddressVector, CompletionQueue, Domain, Endpoint, FabricError, Info, RegisteredMemory,
    RemoteRegion, REMOTE_REGION_BYTES,
};

use crate::plan::merge::IovLimits;

use super::eager::Eager;
use super::peers::{CardSource, Peers};
use super::run::Inbox;
use super::wire;
use super::{Limits, Result, Transport, TransportError};

/// What a rank publishes so that others can reach it: its endpoint name, its control
/// region, its process id (watched by peers on the same host, see `liveness`) and the limits
/// it merges writes under (every rank must use the same: a target counts the merged writes
/// of its sources from their plans).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// The endpoint's name (`fi_getname`), which peers insert into their address vector.
    pub name: Vec<u8>,
    /// The control region, where ready tokens and signals are written.
    pub control: RemoteRegion,
    /// The process id, for peers on the same host.
    pub pid: u32,
    /// The limits of one merged write this rank uses.
    pub iov: IovLimits,
}

/// Bytes of a card before the endpoint name: control region, process id, the two segment
/// limits, the byte cap.
const CARD_HEAD: usize = REMOTE_REGION_BYTES + 20;

impl Card {
    /// The bytes that [`Card::from_bytes`] reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.control.to_bytes().to_vec();
        out.extend_from_slice(&self.pid.to_le_bytes());
        for limit in [self.iov.iov, self.iov.rma_iov] {
            out.extend_from_slice(&u32::try_from(limit).unwrap_or(u32::MAX).to_le_bytes());
        }
        // No cap is written as 0, as providers report it.
        let cap = if self.iov.caps_bytes() {
            self.iov.max_bytes as u64
        } else {
            0
        };
        out.extend_from_slice(&cap.to_le_bytes());
        out.extend_from_slice(&self.name);
        out
    }

    /// Parses [`Card::to_bytes`]; a peer's card that does not parse is an error, not a panic.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Card, FabricError> {
        if bytes.len() <= CARD_HEAD {
            return Err(FabricError::invalid(format!(
                "address card of {} bytes is too short",
                bytes.len()
            )));
        }
        let word = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&bytes[at..at + 4]);
            u32::from_le_bytes(w)
        };
        let iov = IovLimits::new(
            word(REMOTE_REGION_BYTES + 4) as usize,
            word(REMOTE_REGION_BYTES + 8) as usize,
        )
        .map_err(|e| FabricError::invalid(format!("address card: {e}")))?;
        let mut cap = [0u8; 8];
        cap.copy_from_slice(&bytes[REMOTE_REGION_BYTES + 12..CARD_HEAD]);
        let cap = usize::try_from(u64::from_le_bytes(cap)).unwrap_or(usize::MAX);
        let iov = iov.with_max_bytes(cap);
        Ok(Card {
            control: RemoteRegion::from_bytes(&bytes[..REMOTE_REGION_BYTES])?,
            pid: word(REMOTE_REGION_BYTES),
            iov,
            name: bytes[CARD_HEAD..].to_vec(),
        })
    }
}

/// An endpoint opened and its control region registered, before the peers are known.
pub struct Opened {
    endpoint: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    control: RegisteredMemory,
    rank: usize,
    size: usize,
    iov: IovLimits,
}

impl Opened {
    /// Opens an endpoint on `info` for rank `rank` of `size`.
    pub fn open(info: &Info, rank: usize, size: usize) -> Result<Opened> {
        if size == 0 || rank >= size || size as u64 > wire::MAX_FIELD {
            return Err(TransportError::Invalid {
                op: "open".into(),
                what: format!("rank {rank} of {size} ranks is not supported"),
            });
        }
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
        if info.provider() == "shm" {
            crate::fabric::shm::remove_stale_regions_of_this_pid();
        }
        let domain = Domain::open(info)?;
        let depth = info.tx_size().max(info.rx_size()).clamp(256, 1 << 16);
        let cq = CompletionQueue::open(&domain, depth)?;
        let av = AddressVector::open(&domain, size)?;
        let endpoint = Endpoint::open(&domain, &av, &cq, &cq)?;
        // Incoming token slots (one per peer), outgoing ones (the source of our tokens), then
        // the same for eager credit words.
        let control =
            RegisteredMemory::for_endpoint(&endpoint, wire::control_bytes(size), RemoteWrite)?;
        Ok(Opened {
            endpoint,
            cq,
            av,
            control,
            rank,
            size,
            iov: provider_iov_limits(info),
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
        Ok(Card {
            name: self.endpoint.name()?,
            control: self.control.remote(),
            pid: std::process::id(),
            iov: self.iov,
        })
    }

    /// Inserts every rank's card (in rank order) and returns the ready transport.
    pub fn connect(self, cards: &[Card], deadline: Duration) -> Result<Transport> {
        if cards.len() != self.size {
            return Err(TransportError::Invalid {
                op: "connect".into(),
                what: format!("{} address cards for {} ranks", cards.len(), self.size),
            });
        }
        let peers = Peers::all(self.av.clone(), self.rank, cards, self.watches_peers())?;
        Ok(self.into_transport(peers, deadline))
    }

    /// Returns the ready transport knowing only this rank's own card: the card of a peer is
    /// fetched from `source` when an operation first writes to it.
    pub fn connect_lazily(
        self,
        source: Box<dyn CardSource>,
        deadline: Duration,
    ) -> Result<Transport> {
        let own = self.card()?;
        let peers = Peers::lazy(
            self.av.clone(),
            self.rank,
            self.size,
            &own,
            self.watches_peers(),
            source,
        )?;
        Ok(self.into_transport(peers, deadline))
    }

    /// Every shm peer shares this host, so its process can be watched.
    fn watches_peers(&self) -> bool {
        self.endpoint.info().provider() == "shm"
    }

    fn into_transport(self, peers: Peers, deadline: Duration) -> Transport {
        let limits = Limits {
            max_msg_size: self.endpoint.info().max_msg_size(),
        };
        Transport {
            rank: self.rank,
            size: self.size,
            endpoint: self.endpoint,
            cq: self.cq,
            _av: self.av,
            control: self.control,
            peers,
            seq: 0,
            inbox: Inbox::new(self.size),
            eager: Eager::new(self.size),
            limits,
            iov: self.iov,
            deadline,
            copied: 0,
            broken: None,
            active: None,
            completions: Vec::with_capacity(64),
            spare: Default::default(),
        }
    }
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

    fn card(iov: IovLimits) -> Card {
        Card {
            name: vec![1, 2, 3],
            control: RemoteRegion {
                base: 4096,
                len: 64,
                key: 7,
            },
            pid: 42,
            iov,
        }
    }

    #[test]
    fn a_card_round_trips_with_its_limits() {
        let four_one = IovLimits::new(4, 1).unwrap();
        for iov in [four_one, four_one.with_max_bytes(1 << 30)] {
            let c = card(iov);
            assert_eq!(Card::from_bytes(&c.to_bytes()).unwrap(), c);
        }
    }

    #[test]
    fn a_card_with_zero_limits_or_cut_short_is_refused() {
        let mut bytes = card(IovLimits::SINGLE).to_bytes();
        bytes[REMOTE_REGION_BYTES + 4..REMOTE_REGION_BYTES + 8].fill(0);
        let err = Card::from_bytes(&bytes).unwrap_err().to_string();
        assert!(err.contains("iov limit 0"), "{err}");
        assert!(Card::from_bytes(&bytes[..CARD_HEAD]).is_err());
    }
}
