//! Helpers shared by the examples (a directory module, so cargo does not take it for an
//! example of its own).

/// xorshift64* bytes: seeded, so every run works on the same buffer, and incompressible.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        out.extend_from_slice(&s.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}
