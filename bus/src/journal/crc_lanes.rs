//! CRC-32C of several records at once, for sealing a batch the recorder laid out.
//!
//! One record's CRC-32C is a chain of dependent `crc32` instructions (three cycles each on x86,
//! one per 8 bytes): a 64-byte message's record is 12 of them back to back, about a third of the
//! recorder's poll side per message in a profile. Records of one stream are mostly of one
//! length, so four of them are checksummed side by side, their chains interleaved
//! instruction by instruction: four chains in flight fill the instruction's pipeline where one
//! leaves it idle two cycles in three. The `crc32c` crate does the single record (and every
//! length it is given), and is what every result here is tested against.

/// Records checksummed side by side.
pub(crate) const LANES: usize = 4;

/// The CRC-32C of each of `bodies`. Side by side when they are all the same length in whole
/// 8-byte words (a record's body always is) and the CPU has SSE4.2; one at a time otherwise.
pub(crate) fn crc32c_lanes(bodies: [&[u8]; LANES]) -> [u32; LANES] {
    #[cfg(target_arch = "x86_64")]
    {
        let len = bodies[0].len();
        let side_by_side = len.is_multiple_of(8) && bodies.iter().all(|b| b.len() == len);
        if side_by_side && std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE4.2 (checked just above), the only feature `lanes_sse42`
            // enables.
            return unsafe { lanes_sse42(bodies) };
        }
    }
    bodies.map(crc32c::crc32c)
}

/// Four chains of `crc32` over whole little-endian words, interleaved.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn lanes_sse42(bodies: [&[u8]; LANES]) -> [u32; LANES] {
    use std::arch::x86_64::_mm_crc32_u64;
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    // CRC-32C starts from all ones and ends inverted (as `crc32c::crc32c` does).
    let mut c = [u64::from(u32::MAX); LANES];
    let len = bodies[0].len();
    let mut i = 0;
    while i + 8 <= len {
        c[0] = _mm_crc32_u64(c[0], word(bodies[0], i));
        c[1] = _mm_crc32_u64(c[1], word(bodies[1], i));
        c[2] = _mm_crc32_u64(c[2], word(bodies[2], i));
        c[3] = _mm_crc32_u64(c[3], word(bodies[3], i));
        i += 8;
    }
    c.map(|x| !(x as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every whole-word length up to a few lines, with different bytes in every lane, gives
    /// the crate's CRC for each lane, through the interleaved chains themselves.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn lanes_give_the_crates_crc_for_every_lane() {
        assert!(std::is_x86_feature_detected!("sse4.2"), "every x86_64 CPU since 2008 has SSE4.2");
        let data: Vec<u8> = (0..LANES * 512).map(|i| (i * 131 + i / 7) as u8).collect();
        for len in (0..=256).step_by(8) {
            let bodies: [&[u8]; LANES] = std::array::from_fn(|l| &data[l * 512..l * 512 + len]);
            // SAFETY: the CPU has SSE4.2 (asserted above).
            let lanes = unsafe { lanes_sse42(bodies) };
            assert_eq!(lanes, bodies.map(crc32c::crc32c), "length {len}");
            assert_eq!(crc32c_lanes(bodies), lanes, "length {len}: the dispatcher takes the lanes");
        }
    }

    /// Bodies of different lengths, or not in whole words, are still each given their own CRC.
    #[test]
    fn uneven_bodies_fall_back_to_one_at_a_time() {
        let data = [0xa5u8; 64];
        let bodies: [&[u8]; LANES] = [&data[..8], &data[..13], &data[..16], &data[..0]];
        assert_eq!(crc32c_lanes(bodies), bodies.map(crc32c::crc32c));
    }

    /// A flipped bit in one lane changes that lane's CRC only: the chains do not mix.
    #[test]
    fn a_flipped_bit_changes_its_own_lane_only() {
        let mut data = vec![0x5au8; LANES * 96];
        let before: [u32; LANES] = crc32c_lanes(std::array::from_fn(|l| &data[l * 96..l * 96 + 96]));
        data[2 * 96 + 40] ^= 0x10;
        let after: [u32; LANES] = crc32c_lanes(std::array::from_fn(|l| &data[l * 96..l * 96 + 96]));
        for l in 0..LANES {
            assert_eq!(before[l] == after[l], l != 2, "lane {l}");
        }
    }
}
