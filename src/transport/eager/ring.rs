//! The accounting of slot rings, on both sides of a pair, without memory or fabric: the
//! target's reads ([`Reads`]), the writer's slots written and freed ([`Written`]), the credit
//! words that carry read counts back, and which writers' slots a target looks at next
//! ([`Looks`]).
//!
//! Counts are cumulative (slots read, slots written since the ring was set up), so credits
//! that arrive late or out of order never free a slot twice, and sequence numbers are the
//! writer's running slot numbers, checked by the target against its read count.

use super::super::wire;

/// How far a target has read one writer's slots, and which have arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reads {
    /// Slots whose write has arrived and that were not read yet.
    arrived: Vec<bool>,
    /// Slots read so far.
    pub read: u64,
    /// The slot to read next, `read % slots` (kept, not divided for on every look).
    next: usize,
    /// The read count last sent to the writer.
    pub returned: u64,
    /// A credit word is due but could not be posted yet (full transmit queue).
    pub owed: bool,
}

impl Reads {
    /// Nothing read yet of `slots` slots.
    pub fn new(slots: usize) -> Reads {
        Reads {
            arrived: vec![false; slots],
            read: 0,
            next: 0,
            returned: 0,
            owed: false,
        }
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.arrived.len()
    }

    /// The slot to read next, `read % slots`.
    pub fn next(&self) -> usize {
        self.next
    }

    /// Notes that the write into `slot` arrived.
    pub fn arrive(&mut self, slot: usize) -> Result<(), String> {
        let slots = self.slots();
        match self.arrived.get_mut(slot) {
            None => Err(format!("an eager write into slot {slot} of {slots}")),
            Some(true) => Err(format!(
                "an eager write into slot {slot}, which was not read yet"
            )),
            Some(a) => {
                *a = true;
                Ok(())
            }
        }
    }

    /// The slot to read next, if its write has arrived.
    pub fn head(&self) -> Option<usize> {
        self.arrived[self.next].then_some(self.next)
    }

    /// The head slot was read.
    pub fn consume(&mut self) {
        self.arrived[self.next] = false;
        self.read += 1;
        self.next += 1;
        if self.next == self.slots() {
            self.next = 0;
        }
    }

    /// A slot that carried the read count `read` to the writer was posted: no credit word is
    /// needed for it.
    pub fn carried(&mut self, read: u64) {
        self.returned = self.returned.max(read);
        if self.returned == self.read {
            self.owed = false;
        }
    }

    /// Whether the writer should get its credits back: half the ring was read since the last
    /// return (or a return could not be posted).
    pub fn credits_due(&self) -> bool {
        self.owed || self.read - self.returned >= (self.slots() / 2).max(1) as u64
    }

    /// A credit word with the current count was posted (`posted`), or could not be (it is
    /// owed and tried again).
    pub fn returning(&mut self, posted: bool) {
        self.owed = !posted;
        if posted {
            self.returned = self.read;
        }
    }
}

/// A writer's count of one target's slots: written, and freed as the target reported them
/// read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// How many slots the target keeps for this writer.
    pub slots: usize,
    /// Bytes of one.
    pub slot_bytes: usize,
    /// Slots written so far: the number the next slot carries.
    pub written: u64,
    /// Slots the target reported read.
    pub freed: u64,
}

impl Written {
    /// Nothing written yet into `slots` slots of `slot_bytes`.
    pub fn new(slots: usize, slot_bytes: usize) -> Written {
        Written {
            slots,
            slot_bytes,
            written: 0,
            freed: 0,
        }
    }

    /// Slots that may be written now.
    pub fn free(&self) -> usize {
        self.slots - (self.written - self.freed) as usize
    }

    /// The slot the next write goes into.
    pub fn next_slot(&self) -> usize {
        (self.written % self.slots as u64) as usize
    }

    /// Takes a credit word's count (the low 32 bits of the target's read count): the count is
    /// cumulative, so an older word than one already seen changes nothing — also one older
    /// than a count a slot carried since, which may lie more than a ring behind.
    pub fn credit(&mut self, low: u32) -> Result<(), String> {
        let behind = u64::from((self.written as u32).wrapping_sub(low));
        if behind > self.written {
            return Err(format!(
                "credits for {low} slots read (low bits), {} written",
                self.written
            ));
        }
        self.freed = self.freed.max(self.written - behind);
        Ok(())
    }

    /// Takes the full read count a slot from the target carried (its header's `credit`):
    /// cumulative, and maybe older than a credit word already taken. Whether slots were freed.
    pub fn carried(&mut self, read: u64) -> Result<bool, String> {
        if read > self.written {
            return Err(format!(
                "credits for {read} slots read, {} written",
                self.written
            ));
        }
        let freed = read > self.freed;
        self.freed = self.freed.max(read);
        Ok(freed)
    }

    /// Takes the read count the target keeps in memory this writer reads: never more than
    /// written, never more than a ring behind. Whether slots were freed.
    pub fn observed(&mut self, read: u64) -> Result<bool, String> {
        if read > self.written || self.written - read > self.slots as u64 {
            return Err(format!("{read} slots read of {} written", self.written));
        }
        let freed = read > self.freed;
        self.freed = self.freed.max(read);
        Ok(freed)
    }
}

/// A credit word: the low 32 bits of a target's read count, and their complement, so that a
/// word read while the next one lands (a torn read) is recognised and ignored.
pub fn credit_word(read: u64) -> [u8; wire::CREDIT_BYTES] {
    let low = read as u32;
    let mut out = [0; wire::CREDIT_BYTES];
    out[..4].copy_from_slice(&low.to_le_bytes());
    out[4..].copy_from_slice(&(!low).to_le_bytes());
    out
}

/// The 32 bits a credit word carries, or `None` if it is torn.
pub fn read_credit_word(bytes: &[u8; wire::CREDIT_BYTES]) -> Option<u32> {
    let low = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let check = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    (check == !low).then_some(low)
}

/// Which writers' slots a target looks at: those queued (something arrived), not those
/// parked (their next slot belongs to an operation that has not begun), and on every pass
/// those it watches (slots in shared memory, whose arrivals no event tells).
#[derive(Clone, Debug, Default)]
pub struct Looks {
    queued: Vec<usize>,
    queued_flag: Vec<bool>,
    parked: Vec<usize>,
    parked_flag: Vec<bool>,
    watched: Vec<usize>,
}

impl Looks {
    /// Nothing to look at among `size` writers.
    pub fn new(size: usize) -> Looks {
        Looks {
            queued: Vec::new(),
            queued_flag: vec![false; size],
            parked: Vec::new(),
            parked_flag: vec![false; size],
            watched: Vec::new(),
        }
    }

    /// Marks `writer`'s slots to be looked at.
    pub fn queue(&mut self, writer: usize) {
        if !self.queued_flag[writer] {
            self.queued_flag[writer] = true;
            self.queued.push(writer);
        }
    }

    /// The next writer to look at.
    pub fn next(&mut self) -> Option<usize> {
        let writer = self.queued.pop()?;
        self.queued_flag[writer] = false;
        Some(writer)
    }

    /// `writer`'s next slot belongs to an operation that has not begun: not looked at again
    /// before [`Self::unpark`].
    pub fn park(&mut self, writer: usize) {
        if !self.parked_flag[writer] {
            self.parked_flag[writer] = true;
            self.parked.push(writer);
        }
    }

    /// A new operation began: the parked writers are queued.
    pub fn unpark(&mut self) {
        while let Some(writer) = self.parked.pop() {
            self.parked_flag[writer] = false;
            self.queue(writer);
        }
    }

    /// Looks at `writer`'s slots on every pass from now on ([`Self::poll`]).
    pub fn watch(&mut self, writer: usize) {
        if !self.watched.contains(&writer) {
            self.watched.push(writer);
        }
    }

    /// Queues the watched writers that are neither parked nor queued and whose next slot is
    /// there (`arrived`).
    pub fn poll(&mut self, arrived: impl Fn(usize) -> bool) {
        for i in 0..self.watched.len() {
            let writer = self.watched[i];
            if self.parked_flag[writer] || self.queued_flag[writer] {
                continue;
            }
            if arrived(writer) {
                self.queued_flag[writer] = true;
                self.queued.push(writer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_words_survive_only_whole() {
        for read in [0u64, 1, 15, 1 << 32, (1 << 32) + 5, u64::MAX] {
            assert_eq!(read_credit_word(&credit_word(read)), Some(read as u32));
        }
        let mut torn = credit_word(5);
        torn[4..].copy_from_slice(&credit_word(6)[4..]);
        assert_eq!(read_credit_word(&torn), None);
        assert_eq!(read_credit_word(&[0; 8]), None);
    }

    #[test]
    fn slots_are_read_in_order_and_credits_return_at_half_the_ring() {
        let mut reads = Reads::new(4);
        assert_eq!(reads.head(), None);
        // Slot 1 completes before slot 0: nothing to read until slot 0 is there.
        reads.arrive(1).unwrap();
        assert_eq!(reads.head(), None);
        reads.arrive(0).unwrap();
        assert_eq!(reads.head(), Some(0));
        assert!(reads.arrive(0).unwrap_err().contains("not read"));
        assert!(reads.arrive(4).is_err());
        reads.consume();
        assert!(!reads.credits_due());
        assert_eq!(reads.head(), Some(1));
        reads.consume();
        assert!(reads.credits_due());
        reads.returning(true);
        assert!(!reads.credits_due());
        assert_eq!(reads.head(), None);
        // Around the ring.
        for k in 2..9 {
            reads.arrive(k % 4).unwrap();
            assert_eq!(reads.head(), Some(k % 4));
            assert_eq!(reads.next(), k % 4);
            reads.consume();
        }
        assert_eq!(reads.read, 9);
        // A return that could not be posted is owed, whatever was read since.
        reads.returning(false);
        assert!(reads.owed && reads.credits_due());
        reads.returned = 9;
        // A count that went along in a slot settles what was owed up to it.
        reads.carried(9);
        assert!(!reads.credits_due());
        reads.arrive(1).unwrap();
        reads.consume();
        reads.carried(7);
        assert_eq!(reads.returned, 9);
        reads.arrive(2).unwrap();
        reads.consume();
        assert!(reads.credits_due());
        reads.carried(11);
        assert!(!reads.credits_due());
    }

    #[test]
    fn credits_are_cumulative_and_never_run_ahead() {
        let mut out = Written::new(16, 512);
        assert_eq!(out.free(), 16);
        out.written = 16;
        assert_eq!(out.free(), 0);
        out.credit(8).unwrap();
        assert_eq!(out.free(), 8);
        // An older word arriving late changes nothing.
        out.credit(4).unwrap();
        assert_eq!(out.free(), 8);
        // More read than written is a protocol error.
        assert!(out.credit(17).is_err());
        // A word older than a count a slot carried since, more than a ring behind: nothing.
        out.written = 40;
        out.carried(30).unwrap();
        out.credit(8).unwrap();
        assert_eq!(out.freed, 30);
        // Across the 32-bit wrap.
        out.written = (1 << 32) + 3;
        out.freed = (1 << 32) - 10;
        out.credit(2).unwrap();
        assert_eq!(out.freed, (1 << 32) + 2);
        assert_eq!(out.next_slot(), (((1u64 << 32) + 3) % 16) as usize);
        // Counts carried in slots: full 64 bits, cumulative, never beyond what was written.
        let mut carried = Written::new(16, 512);
        carried.written = 20;
        assert!(carried.carried(12).unwrap());
        assert_eq!(carried.free(), 8);
        assert!(!carried.carried(5).unwrap());
        assert_eq!(carried.free(), 8);
        assert!(carried.carried(21).is_err());
    }

    #[test]
    fn counts_read_in_shared_memory_stay_within_one_ring() {
        let mut out = Written::new(4, 256);
        out.written = 6;
        assert!(out.observed(3).unwrap());
        assert_eq!(out.free(), 1);
        assert!(!out.observed(3).unwrap(), "the same count frees nothing");
        // More read than written, or more than a ring unread: the memory is not a ring's.
        assert!(out.observed(7).is_err());
        assert!(out.observed(1).is_err());
        assert!(out.observed(6).unwrap());
        assert_eq!(out.free(), 4);
    }

    #[test]
    fn slot_numbers_follow_the_ring_around() {
        let mut out = Written::new(3, 256);
        let mut reads = Reads::new(3);
        for number in 0..10u64 {
            assert_eq!(out.written, number);
            let slot = out.next_slot();
            out.written += 1;
            reads.arrive(slot).unwrap();
            assert_eq!(
                reads.head(),
                Some(slot),
                "the target reads slot {slot} next"
            );
            assert_eq!(reads.read, number, "the target expects number {number}");
            reads.consume();
            out.carried(reads.read).unwrap();
            assert_eq!(out.free(), 3);
        }
    }

    #[test]
    fn parked_writers_wait_for_the_next_operation() {
        let mut looks = Looks::new(4);
        looks.queue(2);
        looks.queue(2);
        looks.queue(1);
        assert_eq!(looks.next(), Some(1));
        assert_eq!(looks.next(), Some(2));
        assert_eq!(looks.next(), None, "each writer queued once");
        // A parked writer is not polled, even when its slot is there.
        looks.watch(3);
        looks.watch(3);
        looks.park(3);
        looks.poll(|_| true);
        assert_eq!(looks.next(), None);
        // The next operation looks at it again.
        looks.unpark();
        assert_eq!(looks.next(), Some(3));
        assert_eq!(looks.next(), None);
        // Watched writers are queued only when their slot is there, once.
        looks.poll(|w| w == 3);
        looks.poll(|w| w == 3);
        assert_eq!(looks.next(), Some(3));
        assert_eq!(looks.next(), None);
        looks.poll(|_| false);
        assert_eq!(looks.next(), None);
    }
}
