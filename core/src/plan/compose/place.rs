//! Where a group member's sub-buffers lie in a composite's buffers: runs of bytes, so that the
//! blocks of ranks that are not consecutive can form one sub-buffer.

use std::sync::Arc;

use crate::plan::{Buf, BufferSizes, PlanError};

/// One run of a placement: `len` bytes at offset `from` of the sub-buffer lie at offset `to`
/// of the composite's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    from: usize,
    to: usize,
    len: usize,
}

/// Where one sub-buffer of a group member lies in the composite's buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub(super) buf: Buf,
    /// Sorted by `from`, consecutive from 0; shared, as all members of a group often have the
    /// same place (a node's whole receive buffer, one run per rank of the job).
    runs: Arc<[Run]>,
    /// One past the last byte of the composite's buffer it covers.
    end: usize,
}

impl Place {
    /// `len` bytes at `offset` of `buf`.
    pub fn at(buf: Buf, offset: usize, len: usize) -> Place {
        Place {
            buf,
            runs: Arc::new([Run {
                from: 0,
                to: offset,
                len,
            }]),
            end: offset + len,
        }
    }

    /// Nothing: a sub-buffer the member does not use.
    pub fn none(buf: Buf) -> Place {
        Place::at(buf, 0, 0)
    }

    /// The sub-buffer made of these (offset, len) ranges of `buf`, in order; neighbouring
    /// ranges are joined.
    pub fn runs(buf: Buf, ranges: impl IntoIterator<Item = (usize, usize)>) -> Place {
        let mut runs: Vec<Run> = Vec::new();
        let mut from = 0;
        for (to, len) in ranges {
            if len == 0 {
                continue;
            }
            match runs.last_mut() {
                Some(last) if last.to + last.len == to => last.len += len,
                _ => runs.push(Run { from, to, len }),
            }
            from += len;
        }
        let end = runs.iter().map(|r| r.to + r.len).max().unwrap_or(0);
        Place {
            buf,
            runs: runs.into(),
            end,
        }
    }

    /// The composite's buffer it lies in.
    pub fn buf(&self) -> Buf {
        self.buf
    }

    /// Bytes of the sub-buffer.
    pub fn len(&self) -> usize {
        self.runs.last().map_or(0, |r| r.from + r.len)
    }

    /// Whether the sub-buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One past the last byte of the composite's buffer it covers.
    pub(super) fn end(&self) -> usize {
        self.end
    }

    /// The run holding sub offset `off`, and how many bytes of it are left from there.
    fn locate(&self, off: usize) -> Result<(usize, usize), PlanError> {
        let i = self.runs.partition_point(|r| r.from + r.len <= off);
        match self.runs.get(i) {
            Some(r) if r.from <= off => Ok((r.to + (off - r.from), r.from + r.len - off)),
            _ => Err(PlanError::Unsupported {
                algorithm: "composite",
                reason: format!(
                    "offset {off} lies beyond a {}-byte sub-buffer in {}",
                    self.len(),
                    self.buf
                ),
            }),
        }
    }

    /// The composite ranges of sub range `[off, off + len)`, in order.
    pub(super) fn map(
        &self,
        mut off: usize,
        mut len: usize,
    ) -> Result<Vec<(usize, usize)>, PlanError> {
        let mut out = Vec::new();
        while len > 0 {
            let (to, left) = self.locate(off)?;
            let n = left.min(len);
            out.push((to, n));
            off += n;
            len -= n;
        }
        Ok(out)
    }
}

/// The places of one member's sub-buffers (its scratch is placed by the composite).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Places {
    /// The sub-plan's `Send`.
    pub send: Place,
    /// The sub-plan's `Recv`.
    pub recv: Place,
}

impl Places {
    /// Send and receive buffers where they are, whole.
    pub fn same(sizes: BufferSizes) -> Places {
        Places {
            send: Place::at(Buf::Send, 0, sizes.send),
            recv: Place::at(Buf::Recv, 0, sizes.recv),
        }
    }
}

/// Two lists of ranges of equal total length, cut where either ends: (a offset, b offset, len).
pub(super) fn zip_ranges(a: &[(usize, usize)], b: &[(usize, usize)]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut ai, mut bj) = (0usize, 0usize);
    while i < a.len() && j < b.len() {
        let n = (a[i].1 - ai).min(b[j].1 - bj);
        out.push((a[i].0 + ai, b[j].0 + bj, n));
        ai += n;
        bj += n;
        if ai == a[i].1 {
            i += 1;
            ai = 0;
        }
        if bj == b[j].1 {
            j += 1;
            bj = 0;
        }
    }
    out
}

/// The offset in `b` that lies as far into `b` as `at` lies into `a` (both lists of ranges of
/// equal total length; `at` inside `a`).
pub(super) fn along(a: &[(usize, usize)], b: &[(usize, usize)], at: usize) -> usize {
    let mut pos = 0;
    for &(off, n) in a {
        if at >= off && at < off + n {
            pos += at - off;
            break;
        }
        pos += n;
    }
    for &(off, n) in b {
        if pos < n {
            return off + pos;
        }
        pos -= n;
    }
    0
}
