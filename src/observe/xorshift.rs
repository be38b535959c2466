//! Pseudo-random bytes for the observe modules' tests (garbage inputs that must never
//! panic): Marsaglia's xorshift64, the same bytes on every run, without a dependency.

/// A xorshift64 generator.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (not 0).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// `len` bytes: the low byte of each next value.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
