//! Which capture container a file is, told from its first bytes: built without the `pcap`
//! feature too, so a build that reads no captures still recognises one and says so.

/// Which container the capture is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    /// The classic libpcap format.
    Pcap,
    /// pcapng.
    PcapNg,
}

impl CaptureFormat {
    /// The container whose magic number `head` (a file's first bytes) starts with: pcap in either
    /// byte order with micro- or nanosecond times, or pcapng. None for anything else.
    pub fn detect(head: &[u8]) -> Option<CaptureFormat> {
        let magic = u32::from_le_bytes(head.get(..4)?.try_into().ok()?);
        match magic {
            0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => Some(CaptureFormat::Pcap),
            0x0a0d_0d0a => Some(CaptureFormat::PcapNg),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CaptureFormat;

    /// Every first four bytes a capture starts with, and a journal's, an ITCH file's and a cut
    /// one's, which are none.
    #[test]
    fn captures_are_told_by_their_magic_and_nothing_else_is() {
        let pcap = Some(CaptureFormat::Pcap);
        let heads: [(&[u8], Option<CaptureFormat>); 8] = [
            (&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0], pcap),
            (&[0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4], pcap),
            (&[0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0], pcap),
            (&[0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4], pcap),
            (&[0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0], Some(CaptureFormat::PcapNg)),
            (&[0, 12, b'S', 0, 0, 0, 0, 0], None),
            (b"TBJOURNL", None),
            (&[0xd4, 0xc3], None),
        ];
        for (h, want) in heads {
            assert_eq!(CaptureFormat::detect(h), want, "{h:02x?}");
        }
    }
}
