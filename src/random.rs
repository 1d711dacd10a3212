//! Unpredictable bytes from the operating system (`getrandom(2)`), for what a peer or another
//! user must not guess: memory-registration keys and a job's authentication key.

use std::io;

use rustix::rand::{getrandom, GetRandomFlags};

/// Fills `buf` with random bytes.
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match getrandom(&mut buf[filled..], GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// A random 64-bit number.
pub fn u64() -> io::Result<u64> {
    let mut bytes = [0; 8];
    fill(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}

/// `len` random bytes as lowercase hex.
pub fn hex(len: usize) -> io::Result<String> {
    let mut bytes = vec![0; len];
    fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_and_cover_the_requested_length() {
        let a = u64().expect("random");
        let b = u64().expect("random");
        // Equal draws of 64 random bits have a probability of 2^-64.
        assert_ne!(a, b);
        let key = hex(32).expect("random");
        assert_eq!(key.len(), 64);
        assert!(key.bytes().all(|c| c.is_ascii_hexdigit()));
        let mut big = vec![0u8; 1 << 16];
        fill(&mut big).expect("random");
        assert!(big.iter().filter(|&&b| b == 0).count() < 1 << 10);
    }
}
