//! Values by ITCH order reference number: a direct-mapped table with a spill map.
//!
//! ITCH numbers orders in increasing order through the day, and most orders leave the book soon
//! after they come. A table indexed by the reference modulo its size therefore keeps the orders
//! alive at one moment together, a few to a cache line and many to a page, where a hash table
//! spreads the same orders over its whole reservation. A trader's book reserved for a day's peak
//! but holding a few thousand orders took a cache miss and a TLB miss on nearly every message
//! with the hash table (about 50 ns a tick in the trading pipeline), and one slot read is the
//! whole lookup here.
//!
//! An order whose slot is still held by an older live order (one that rested while the
//! references went once round the table) goes in the spill map, an `FxHashMap`, and its slot
//! counts it. A lookup reads the spill map only when the slot counts a spilled reference, so a
//! reference the table does not hold (the book's check before an add) is one slot read too.
//! The table is correct for any reference pattern; references that are not increasing only
//! spill more, and each spilled lookup costs one slot read more than the hash table alone would.
use rustc_hash::FxHashMap;
use zerocopy::FromZeros;

/// One slot: the reference it holds (0: empty, a reference ITCH never assigns), how many
/// references of this slot the spill map holds, and the value.
#[derive(Debug, Clone, Copy, FromZeros)]
struct Slot<V> {
    key: u64,
    /// A word either way (the value is word-aligned), and it cannot overflow.
    spilled: usize,
    value: V,
}

/// Values of type `V` by order reference number (never 0). Capacity is reserved up front: the
/// slots never grow; the spill map allocates only when more orders spill than it reserved.
#[derive(Clone)]
pub struct RefTable<V> {
    slots: Box<[Slot<V>]>,
    mask: u64,
    spill: FxHashMap<u64, V>,
    len: usize,
}

impl<V: Copy + FromZeros> RefTable<V> {
    /// A table of at least `orders` slots (rounded up to a power of two) and a spill map
    /// reserved for an eighth of that. The slots start as zeroed memory (an empty slot's value
    /// is never read), which the kernel maps as it is first written: [`RefTable::pre_touch`] writes
    /// it all before a hot loop starts.
    ///
    /// # Panics
    /// When the slots or the spill map's reservation do not fit in memory.
    pub fn with_capacity(orders: usize) -> RefTable<V> {
        fn too_big(orders: usize) -> ! {
            panic!("an order table for {orders} orders does not fit in memory")
        }
        let n = orders.max(16).checked_next_power_of_two().unwrap_or_else(|| too_big(orders));
        let slots = <[Slot<V>]>::new_box_zeroed_with_elems(n).unwrap_or_else(|_| too_big(orders));
        let mut spill = FxHashMap::default();
        spill.try_reserve(n / 8).unwrap_or_else(|_| too_big(orders));
        RefTable { slots, mask: n as u64 - 1, spill, len: 0 }
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        (key & self.mask) as usize
    }

    /// The value held for `key`.
    #[inline]
    pub fn get(&self, key: &u64) -> Option<&V> {
        let s = &self.slots[self.slot(*key)];
        if s.key == *key && *key != 0 {
            return Some(&s.value);
        }
        if s.spilled == 0 {
            return None;
        }
        self.spill.get(key)
    }

    /// The value held for `key`, to change in place.
    #[inline]
    pub fn get_mut(&mut self, key: &u64) -> Option<&mut V> {
        let i = self.slot(*key);
        let s = &mut self.slots[i];
        if s.key == *key && *key != 0 {
            return Some(&mut s.value);
        }
        if s.spilled == 0 {
            return None;
        }
        self.spill.get_mut(key)
    }

    /// The bytes of `key`'s home slot (its address and length), found without reading the table
    /// (the slot is the key's low bits): for a prefetch, which must not wait on the line it asks
    /// for, as a lookup's read of the slot's key does. The whole slot, because a lookup reads the
    /// key before the value and a 48-byte slot may put them on different lines. A key the spill
    /// map holds, or one not held at all, gets its home slot all the same, whatever that holds.
    #[inline]
    pub fn home_of(&self, key: u64) -> (*const u8, usize) {
        let s: *const Slot<V> = &self.slots[self.slot(key)];
        (s.cast(), std::mem::size_of::<Slot<V>>())
    }

    /// Whether a value is held for `key`.
    #[inline]
    pub fn contains_key(&self, key: &u64) -> bool {
        self.get(key).is_some()
    }

    /// Holds `value` for `key`, returning the value it replaced. Key 0 is held in the spill map
    /// (the slots use it to mean empty).
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let i = self.slot(key);
        let s = &mut self.slots[i];
        if s.key == key && key != 0 {
            return Some(std::mem::replace(&mut s.value, value));
        }
        if s.spilled != 0 {
            if let Some(v) = self.spill.get_mut(&key) {
                return Some(std::mem::replace(v, value));
            }
        }
        self.len += 1;
        if s.key == 0 && key != 0 {
            *s = Slot { key, spilled: s.spilled, value };
        } else {
            s.spilled += 1;
            self.spill.insert(key, value);
        }
        None
    }

    /// Takes the value held for `key` out of the table.
    #[inline]
    pub fn remove(&mut self, key: &u64) -> Option<V> {
        let i = self.slot(*key);
        let s = &mut self.slots[i];
        if s.key == *key && *key != 0 {
            s.key = 0;
            self.len -= 1;
            return Some(s.value);
        }
        if s.spilled == 0 {
            return None;
        }
        let old = self.spill.remove(key)?;
        s.spilled -= 1;
        self.len -= 1;
        Some(old)
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Values held in the spill map (their slot was taken when they came).
    pub fn spilled(&self) -> usize {
        self.spill.len()
    }

    /// Slots (a power of two): the references that fit before they go round the table.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Values the spill map holds before it must grow (an allocation).
    pub fn spill_room(&self) -> usize {
        self.spill.capacity()
    }

    /// Every value held, in no particular order. Reads every slot: for checks and reports,
    /// not a hot path.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().filter(|s| s.key != 0).map(|s| &s.value).chain(self.spill.values())
    }

    /// Empties the table, keeping its memory. Reads slots until every value a slot held is
    /// found (writing only those), so it maps no page it did not use; up to milliseconds for a
    /// day's reservation, so not for a hot path.
    pub fn clear(&mut self) {
        for k in self.spill.keys() {
            self.slots[(k & self.mask) as usize].spilled = 0;
        }
        let mut left = self.len - self.spill.len();
        for s in self.slots.iter_mut() {
            if left == 0 {
                break;
            }
            if s.key != 0 {
                s.key = 0;
                left -= 1;
            }
        }
        self.spill.clear();
        self.len = 0;
    }

    /// Writes every page the slots and (while it is empty) the spill map reserved, holding
    /// what it held: the kernel maps a page on its first write.
    pub fn pre_touch(&mut self) {
        for s in self.slots.iter_mut() {
            // A write of what is there: the page is mapped, nothing changes.
            s.spilled = std::hint::black_box(s.spilled);
        }
        if self.spill.is_empty() {
            let room = self.spill.capacity() as u64;
            for k in 1..=room {
                self.spill.insert(k.wrapping_mul(0x9e37_79b9_7f4a_7c15), V::new_zeroed());
            }
            self.spill.clear();
        }
    }
}

/// Its counts, not its slots (a day's table has millions).
impl<V> std::fmt::Debug for RefTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefTable")
            .field("len", &self.len)
            .field("slots", &self.slots.len())
            .field("spilled", &self.spill.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::mem::size_of;

    #[test]
    fn a_reference_whose_slot_is_held_spills_and_both_stay_found() {
        let mut t = RefTable::<u32>::with_capacity(16);
        assert_eq!(t.slots(), 16);
        assert_eq!(t.insert(3, 30), None);
        // 19 and 35 map to 3's slot while 3 still rests.
        assert_eq!(t.insert(19, 190), None);
        assert_eq!(t.insert(35, 350), None);
        assert_eq!((t.len(), t.spilled()), (3, 2));
        assert_eq!((t.get(&3), t.get(&19), t.get(&35)), (Some(&30), Some(&190), Some(&350)));
        assert_eq!(t.get(&51), None);
        // 3 leaves: its slot is free, 19 and 35 are still found in the spill map.
        assert_eq!(t.remove(&3), Some(30));
        assert_eq!((t.get(&3), t.get(&19)), (None, Some(&190)));
        // A replaced value of a spilled key stays in the spill map, not twice.
        assert_eq!(t.insert(19, 191), Some(190));
        assert_eq!((t.len(), t.spilled()), (2, 2));
        // A key in the spill map whose slot is now free is not held twice.
        assert_eq!(t.insert(35, 351), Some(350));
        assert_eq!(t.len(), 2);
        *t.get_mut(&19).unwrap() += 1;
        assert_eq!(t.remove(&19), Some(192));
        assert_eq!(t.remove(&19), None);
        assert_eq!((t.len(), t.spilled()), (1, 1));
    }

    /// The warming's bytes: a key its slot holds has its key and value inside them; one spilled
    /// (or not held) gets its home slot, the slot's holder, never the spill map's copy.
    #[test]
    fn a_keys_home_is_the_slot_holding_it_and_a_spilled_key_gets_its_slot() {
        let mut t = RefTable::<u64>::with_capacity(16);
        t.insert(3, 30);
        t.insert(19, 190); // spilled: 3 holds the slot
        let inside = |(at, len): (*const u8, usize), v: &u64| {
            let (a, v) = (at as usize, v as *const u64 as usize);
            a <= v && v + 8 <= a + len
        };
        assert_eq!(t.home_of(3).1, size_of::<Slot<u64>>());
        assert!(inside(t.home_of(3), t.get(&3).unwrap()), "the value is in its home slot");
        assert_eq!(t.home_of(19), t.home_of(3), "a spilled key's home is its slot");
        assert!(!inside(t.home_of(19), t.get(&19).unwrap()), "not the spill map's copy");
        assert_eq!(t.home_of(51), t.home_of(3), "a key not held: its slot all the same");
        let (a3, a4) = (t.home_of(3).0 as usize, t.home_of(4).0 as usize);
        assert_eq!(a4 - a3, size_of::<Slot<u64>>(), "slots side by side");
    }

    #[test]
    fn pre_touching_a_table_in_use_keeps_what_it_holds() {
        let mut t = RefTable::<u32>::with_capacity(16);
        t.pre_touch();
        assert!(t.is_empty() && t.spill_room() >= 2, "an empty table stays empty");
        t.insert(5, 50);
        t.insert(21, 210);
        t.pre_touch();
        assert_eq!((t.len(), t.spilled(), t.get(&5), t.get(&21)), (2, 1, Some(&50), Some(&210)));
        assert_eq!(t.remove(&21), Some(210));
        assert_eq!((t.len(), t.spilled()), (1, 0));
    }

    #[test]
    fn reference_zero_is_never_an_empty_slot() {
        let mut t = RefTable::<u32>::with_capacity(16);
        assert_eq!(t.get(&0), None, "an empty slot's key is 0, and holds nothing");
        assert_eq!(t.remove(&0), None);
        assert_eq!(t.insert(0, 1), None);
        assert_eq!((t.get(&0), t.spilled()), (Some(&1), 1));
        assert_eq!(t.get(&16), None);
        assert_eq!(t.remove(&0), Some(1));
        assert!(t.is_empty());
    }

    /// Against a `HashMap`, over references that go round the table many times with some
    /// values resting long: every operation gives the same answer.
    #[test]
    fn it_answers_as_a_hash_map_does() {
        let mut t = RefTable::<u64>::with_capacity(64);
        let mut m = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = 1u64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = match x % 4 {
                0 => {
                    next += 1;
                    next
                }
                1 => next.saturating_sub(x % 200),
                2 => next.saturating_sub(x % 5),
                _ => x % 4096,
            };
            match (x >> 8) % 5 {
                0 => assert_eq!(t.insert(key, step), m.insert(key, step), "insert {key}"),
                1 => assert_eq!(t.remove(&key), m.remove(&key), "remove {key}"),
                2 => assert_eq!(t.contains_key(&key), m.contains_key(&key), "contains {key}"),
                3 => match (t.get_mut(&key), m.get_mut(&key)) {
                    (Some(a), Some(b)) => (*a, *b) = (step, step),
                    (None, None) => {}
                    (a, b) => panic!("get_mut {key}: {a:?} against {b:?}"),
                },
                _ => assert_eq!(t.get(&key), m.get(&key), "get {key}"),
            }
            assert_eq!(t.len(), m.len());
            if step % 5_000 == 4_999 {
                // Everything held is still found, then the table is emptied and used again.
                for (k, v) in &m {
                    assert_eq!(t.get(k), Some(v), "key {k} before the clear");
                }
                let mut a: Vec<u64> = t.values().copied().collect();
                let mut b: Vec<u64> = m.values().copied().collect();
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b);
                t.clear();
                m.clear();
                assert!(t.is_empty() && t.values().next().is_none() && t.spilled() == 0);
                assert!(t.slots.iter().all(|s| s.key == 0 && s.spilled == 0), "a slot left set by the clear");
            }
        }
    }
}
