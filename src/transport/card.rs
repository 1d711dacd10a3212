//! What a rank publishes so that others can reach it (its card), and its encoding.

use crate::fabric::{FabricError, RemoteRegion, REMOTE_REGION_BYTES};
use crate::plan::merge::IovLimits;

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
    /// How the ranks of this rank's node reach it, where it has a fabric for them.
    pub node: Option<NodeCard>,
}

/// The part of a card for the ranks of the same node: the endpoint of the node fabric and the
/// control region's registration with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCard {
    /// The node fabric endpoint's name.
    pub name: Vec<u8>,
    /// The control region, as reached through the node fabric.
    pub control: RemoteRegion,
}

/// Bytes of a card before the endpoint name: control region, process id, the two segment
/// limits, the byte cap, the name's length.
const CARD_HEAD: usize = REMOTE_REGION_BYTES + 22;

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
        // Endpoint names are a few dozen bytes; a longer one is refused when the card is read.
        let len = u16::try_from(self.name.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.name);
        if let Some(node) = &self.node {
            out.extend_from_slice(&node.control.to_bytes());
            out.extend_from_slice(&node.name);
        }
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
        cap.copy_from_slice(&bytes[REMOTE_REGION_BYTES + 12..REMOTE_REGION_BYTES + 20]);
        let cap = usize::try_from(u64::from_le_bytes(cap)).unwrap_or(usize::MAX);
        let iov = iov.with_max_bytes(cap);
        let name_len = usize::from(u16::from_le_bytes([
            bytes[REMOTE_REGION_BYTES + 20],
            bytes[REMOTE_REGION_BYTES + 21],
        ]));
        let rest = &bytes[CARD_HEAD..];
        if name_len == 0 || name_len > rest.len() {
            return Err(FabricError::invalid(format!(
                "address card names an endpoint of {name_len} bytes in {} bytes",
                rest.len()
            )));
        }
        let (name, rest) = rest.split_at(name_len);
        let node = if rest.is_empty() {
            None
        } else if rest.len() <= REMOTE_REGION_BYTES {
            return Err(FabricError::invalid(format!(
                "address card ends in a node part of {} bytes",
                rest.len()
            )));
        } else {
            let (control, name) = rest.split_at(REMOTE_REGION_BYTES);
            Some(NodeCard {
                name: name.to_vec(),
                control: RemoteRegion::from_bytes(control)?,
            })
        };
        Ok(Card {
            control: RemoteRegion::from_bytes(&bytes[..REMOTE_REGION_BYTES])?,
            pid: word(REMOTE_REGION_BYTES),
            iov,
            name: name.to_vec(),
            node,
        })
    }
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
            node: None,
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
