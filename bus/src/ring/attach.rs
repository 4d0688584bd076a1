//! Creating a ring in fresh memory and reading back the descriptor of an existing one.
use super::error::LayoutError;
use super::layout::{Descriptor, RingConfig, DESCRIPTOR_WORDS, HEADER_BYTES};
use super::memory::Words;
use super::sync::Ordering;

/// Writes `cfg`'s descriptor into zeroed memory, `magic` last with Release so that a reader that
/// sees the magic sees the whole descriptor.
pub(crate) fn init(w: &Words, cfg: &RingConfig, created_unix_ns: u64) -> Result<(), LayoutError> {
    cfg.validate()?;
    check_size(w, cfg)?;
    let image: [u64; DESCRIPTOR_WORDS] = zerocopy::transmute!(cfg.descriptor(created_unix_ns));
    for (i, v) in image.iter().enumerate().skip(1) {
        w.word(i).store(*v, Ordering::Relaxed);
    }
    w.word(0).store(image[0], Ordering::Release);
    Ok(())
}

/// Checks the memory holds at least a whole header (the producer and consumer lines).
pub(crate) fn check_header(w: &Words) -> Result<(), LayoutError> {
    if w.len() * 8 < HEADER_BYTES {
        return Err(LayoutError::TooSmall { need: HEADER_BYTES, have: w.len() * 8 });
    }
    Ok(())
}

/// Reads and validates the descriptor of an initialised ring.
pub(crate) fn read(w: &Words) -> Result<RingConfig, LayoutError> {
    if w.len() < DESCRIPTOR_WORDS {
        return Err(LayoutError::TooSmall { need: DESCRIPTOR_WORDS * 8, have: w.len() * 8 });
    }
    if w.word(0).load(Ordering::Acquire) == 0 {
        return Err(LayoutError::NotReady);
    }
    let mut image = [0u64; DESCRIPTOR_WORDS];
    for (i, v) in image.iter_mut().enumerate() {
        *v = w.word(i).load(Ordering::Relaxed);
    }
    let d: Descriptor = zerocopy::transmute!(image);
    let cfg = RingConfig::from_descriptor(&d)?;
    check_size(w, &cfg)?;
    Ok(cfg)
}

fn check_size(w: &Words, cfg: &RingConfig) -> Result<(), LayoutError> {
    let need = cfg.ring_bytes();
    if w.len() * 8 < need {
        return Err(LayoutError::TooSmall { need, have: w.len() * 8 });
    }
    Ok(())
}
