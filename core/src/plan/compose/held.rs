//! When each byte range of a rank's buffers was produced in a composite: what makes its phases
//! overlap (a piece waits for the round that produced its data, not for the phase before).

use std::collections::BTreeMap;

use crate::plan::{Buf, Local};

/// When each range of a rank's buffers was last produced in the composite: the round whose
/// completion makes it held (`None`: held from the start).
#[derive(Default)]
pub(super) struct Held {
    /// Per buffer: start → (end, round), ranges not overlapping.
    ranges: [BTreeMap<usize, (usize, u32)>; 3],
}

fn slot(buf: Buf) -> usize {
    match buf {
        Buf::Send => 0,
        Buf::Recv => 1,
        Buf::Scratch => 2,
    }
}

impl Held {
    /// The ranges of `buf` that overlap `[off, end)`, as (start, end, round).
    fn overlapping(&self, buf: Buf, off: usize, end: usize) -> Vec<(usize, usize, u32)> {
        let map = &self.ranges[slot(buf)];
        // The range starting at or before `off` may reach into it; the others start inside.
        let before = map
            .range(..=off)
            .next_back()
            .map(|(&s, &(e, r))| (s, e, r))
            .filter(|&(_, e, _)| e > off);
        before
            .into_iter()
            .chain(
                map.range(off.saturating_add(1)..end)
                    .map(|(&s, &(e, r))| (s, e, r)),
            )
            .collect()
    }

    /// The round after which all of `[off, off + len)` of `buf` is held.
    pub(super) fn range(&self, buf: Buf, off: usize, len: usize) -> Option<u32> {
        if len == 0 {
            return None;
        }
        self.overlapping(buf, off, off + len)
            .into_iter()
            .map(|(_, _, r)| r)
            .max()
    }

    /// `[off, off + len)` of `buf` is produced at `round`.
    pub(super) fn put(&mut self, buf: Buf, off: usize, len: usize, round: Option<u32>) {
        let Some(round) = round else {
            return;
        };
        if len == 0 {
            return;
        }
        let end = off + len;
        let old = self.overlapping(buf, off, end);
        let map = &mut self.ranges[slot(buf)];
        for (s, e, r) in old {
            map.remove(&s);
            if s < off {
                map.insert(s, (off, r));
            }
            if e > end {
                map.insert(end, (e, r));
            }
        }
        map.insert(off, (end, round));
    }

    /// The round after which what `step` reads is held.
    pub(super) fn reads(&self, step: &Local) -> Option<u32> {
        match *step {
            Local::Copy {
                src,
                src_offset,
                len,
                ..
            } => self.range(src, src_offset, len),
            Local::Combine { a, b, len, .. } => {
                self.range(a.0, a.1, len).max(self.range(b.0, b.1, len))
            }
        }
    }

    /// `step` runs at `round`: what it writes is held then.
    pub(super) fn writes(&mut self, step: &Local, round: Option<u32>) {
        let (buf, off, len) = step.output();
        self.put(buf, off, len, round);
    }
}
