//! The few protobuf encodings the OTLP exporter writes. Every span of a sampled trace
//! is encoded here, so a message's length is worked out before it is written and its
//! bytes go into room made once ([`Cursor`]): no byte pushed with its own capacity
//! check, no length fixed up after its content (docs/performance.md §17).

pub(super) const VARINT: u8 = 0;
pub(super) const FIXED64: u8 = 1;
pub(super) const LEN: u8 = 2;
pub(super) const FIXED32: u8 = 5;

/// A one-byte tag (fields 1 to 15).
pub(super) const fn tag(field: u8, wire: u8) -> u8 {
    field << 3 | wire
}

/// Bytes `value` takes as a varint.
pub(super) fn varint_len(value: u64) -> usize {
    // Most lengths in a span take one byte, a span's own two.
    match value {
        0..0x80 => 1,
        0x80..0x4000 => 2,
        _ => (64 - value.leading_zeros() as usize).div_ceil(7),
    }
}

/// Bytes a length-delimited field with a one-byte tag and `length` bytes of content
/// takes.
pub(super) fn field_len(length: usize) -> usize {
    1 + varint_len(length as u64) + length
}

/// Bytes a string or bytes field with a one-byte tag takes (none when empty: proto3's
/// default is left out).
pub(super) fn string_len(text: &[u8]) -> usize {
    match text.len() {
        0 => 0,
        length => field_len(length),
    }
}

/// Appends `length` bytes that `write` fills through a [`Cursor`].
pub(super) fn append(out: &mut Vec<u8>, length: usize, write: impl FnOnce(&mut Cursor<'_>)) {
    let start = out.len();
    out.resize(start + length, 0);
    let mut cursor = Cursor::new(&mut out[start..]);
    write(&mut cursor);
    debug_assert!(cursor.0.is_empty(), "the length worked out was too long");
}

/// Writes into room made for exactly what is written.
pub(super) struct Cursor<'a>(&'a mut [u8]);

impl<'a> Cursor<'a> {
    pub(super) fn new(room: &'a mut [u8]) -> Self {
        Self(room)
    }

    /// Panics when the room is too small: a length worked out wrong.
    #[inline]
    pub(super) fn put(&mut self, bytes: &[u8]) {
        let (head, tail) = std::mem::take(&mut self.0).split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.0 = tail;
    }

    fn byte(&mut self, byte: u8) {
        let (first, rest) = std::mem::take(&mut self.0)
            .split_first_mut()
            .expect("room for the length worked out");
        *first = byte;
        self.0 = rest;
    }

    pub(super) fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte(value as u8 | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    /// A length-delimited field's tag and length (its content follows).
    #[inline]
    pub(super) fn field(&mut self, tag: u8, length: usize) {
        match u8::try_from(length) {
            Ok(length) if length < 0x80 => self.put(&[tag, length]),
            _ => {
                self.byte(tag);
                self.varint(length as u64);
            }
        }
    }

    /// A string or bytes field, left out when empty.
    pub(super) fn string(&mut self, field: u8, text: &[u8]) {
        if !text.is_empty() {
            self.field(tag(field, LEN), text.len());
            self.put(text);
        }
    }

    pub(super) fn fixed64(&mut self, field: u8, value: u64) {
        let mut bytes = [tag(field, FIXED64); 9];
        bytes[1..].copy_from_slice(&value.to_le_bytes());
        self.put(&bytes);
    }
}

impl std::fmt::Debug for Cursor<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Cursor({} bytes left)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_worked_out_match_what_is_written() {
        for value in [0_u64, 1, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut out = Vec::new();
            append(&mut out, varint_len(value), |cursor| cursor.varint(value));
            assert_eq!(out.len(), varint_len(value), "{value}");
            // Seven bits per byte, low first, the high bit saying more follow.
            let decoded = out.iter().enumerate().fold(0_u64, |sum, (at, byte)| {
                sum | u64::from(byte & 0x7f) << (7 * at)
            });
            assert_eq!(decoded, value);
        }
        for text in ["", "a", &"x".repeat(300)] {
            let mut out = Vec::new();
            append(&mut out, string_len(text.as_bytes()), |cursor| {
                cursor.string(5, text.as_bytes())
            });
            assert_eq!(out.len(), string_len(text.as_bytes()));
            if !text.is_empty() {
                assert_eq!(out[0], tag(5, LEN));
                assert!(out.ends_with(text.as_bytes()));
            }
        }
    }
}
