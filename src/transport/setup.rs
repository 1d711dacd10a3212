//! Setting a transport up: an endpoint opened with its control region, the card a rank
//! publishes so that others can reach it, and connecting to every rank's card.

use std::time::Duration;

use crate::fabric::Access::RemoteWrite;
use crate::fabric::{
    AddressVector, CompletionQueue, Domain, Endpoint, FabricError, Info, RegisteredMemory,
    RemoteRegion, REMOTE_REGION_BYTES,
};

use super::liveness::PeerProcesses;
use super::run::Inbox;
use super::wire;
use super::{Limits, Result, Transport, TransportError};

/// What a rank publishes so that others can reach it: its endpoint name, its control
/// region and its process id (watched by peers on the same host, see `liveness`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// The endpoint's name (`fi_getname`), which peers insert into their address vector.
    pub name: Vec<u8>,
    /// The control region, where ready tokens and signals are written.
    pub control: RemoteRegion,
    /// The process id, for peers on the same host.
    pub pid: u32,
}

impl Card {
    /// The bytes that [`Card::from_bytes`] reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.control.to_bytes().to_vec();
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.name);
        out
    }

    /// Parses [`Card::to_bytes`]; a peer's card that does not parse is an error, not a panic.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Card, FabricError> {
        let head = REMOTE_REGION_BYTES + 4;
        if bytes.len() <= head {
            return Err(FabricError::invalid(format!(
                "address card of {} bytes is too short",
                bytes.len()
            )));
        }
        let mut pid = [0u8; 4];
        pid.copy_from_slice(&bytes[REMOTE_REGION_BYTES..head]);
        Ok(Card {
            control: RemoteRegion::from_bytes(&bytes[..REMOTE_REGION_BYTES])?,
            pid: u32::from_le_bytes(pid),
            name: bytes[head..].to_vec(),
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
        })
    }

    /// What the other ranks need to reach this one.
    pub fn card(&self) -> Result<Card> {
        Ok(Card {
            name: self.endpoint.name()?,
            control: self.control.remote(),
            pid: std::process::id(),
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
        let mut peers = Vec::with_capacity(self.size);
        for card in cards {
            peers.push(self.av.insert(&card.name)?);
        }
        let info = self.endpoint.info();
        // Every shm peer shares this host, so its process can be watched.
        let processes = if info.provider() == "shm" {
            let pids: Vec<u32> = cards.iter().map(|c| c.pid).collect();
            PeerProcesses::watch(&pids, self.rank)
        } else {
            PeerProcesses::none(self.size)
        };
        let limits = Limits {
            max_msg_size: info.max_msg_size(),
        };
        Ok(Transport {
            rank: self.rank,
            size: self.size,
            endpoint: self.endpoint,
            cq: self.cq,
            _av: self.av,
            control: self.control,
            peers,
            peer_control: cards.iter().map(|c| c.control).collect(),
            processes,
            seq: 0,
            inbox: Inbox::new(self.size),
            limits,
            deadline,
            copied: 0,
            broken: None,
            active: None,
            completions: Vec::with_capacity(64),
        })
    }
}
