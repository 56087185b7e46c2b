//! HMAC-SHA-256 and the constant-time comparisons the providers' signatures need.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 of `parts` (concatenated) keyed by `key`, as lowercase hex.
pub(crate) fn hex_hmac(key: &[u8], parts: &[&[u8]]) -> String {
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        // HMAC takes keys of any length; unreachable in practice.
        return String::new();
    };
    for part in parts {
        mac.update(part);
    }
    hex(&mac.finalize().into_bytes())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        text.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    text
}

/// Equal texts, compared in constant time (for a given length).
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// True when `timestamp` is within `window` seconds of `now`, either way.
pub(crate) fn fresh(timestamp: i64, now: i64, window: i64) -> bool {
    (now - timestamp).abs() <= window
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231 test case 2.
        assert_eq!(
            hex_hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn windows_apply_both_ways() {
        assert!(fresh(1000, 1300, 300));
        assert!(fresh(1300, 1000, 300));
        assert!(!fresh(1000, 1301, 300));
        assert!(!fresh(1301, 1000, 300));
    }
}
