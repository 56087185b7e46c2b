//! Signing and verifying deliveries: `X-Service-Signature: t=<unix>,v1=<hex>` where
//! the hex is an HMAC-SHA-256, keyed by the secret, of `"<t>.<raw body>"`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use sha2::Sha256;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-service-signature";
/// The delivery id header: stable across retries, the receiver's deduplication key.
pub const DELIVERY_ID_HEADER: &str = "x-service-delivery-id";
/// The attempt number header (the inline attempt is 1).
pub const ATTEMPT_HEADER: &str = "x-service-attempt";
/// The default window a signature's timestamp must fall in, either way.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

type HmacSha256 = Hmac<Sha256>;

/// Why a delivery's signature was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// No signature header.
    #[error("the delivery carries no signature")]
    Missing,
    /// The header is not `t=<unix>,v1=<hex>`.
    #[error("the signature header is malformed")]
    Malformed,
    /// The timestamp is outside the tolerance window (a replay, or a bad clock).
    #[error("the signature's timestamp is outside the tolerance window")]
    Stale,
    /// No secret produces the signature: wrong secret or altered body.
    #[error("the signature does not match the body")]
    Mismatch,
}

/// The signature header value for `body` sent at `timestamp` (unix seconds).
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = keyed(secret.as_bytes(), timestamp);
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    format!("t={timestamp},v1={hex}")
}

/// Verifies a received delivery: the signature header of `headers` against the raw
/// body bytes (never a re-serialized body), trying every secret (rotation), in
/// constant time, refusing timestamps more than `tolerance` away in either direction.
pub fn verify<S: AsRef<[u8]>>(
    headers: &HeaderMap,
    raw_body: &[u8],
    secrets: &[S],
    tolerance: Duration,
) -> Result<(), Rejection> {
    let header = match headers.get(SIGNATURE_HEADER) {
        None => return Err(Rejection::Missing),
        Some(value) => value.to_str().map_err(|_| Rejection::Malformed)?,
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64);
    verify_header(header, raw_body, secrets, tolerance, now)
}

/// [`verify`] on the header's value, at `now` (unix seconds).
pub fn verify_header<S: AsRef<[u8]>>(
    header: &str,
    raw_body: &[u8],
    secrets: &[S],
    tolerance: Duration,
    now: i64,
) -> Result<(), Rejection> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => {
                timestamp = Some(value.parse::<i64>().map_err(|_| Rejection::Malformed)?)
            }
            Some(("v1", value)) => signatures.push(decode_hex(value).ok_or(Rejection::Malformed)?),
            // Other schemes may be added later; they are not ours to judge.
            Some(_) => {}
            None => return Err(Rejection::Malformed),
        }
    }
    let timestamp = timestamp.ok_or(Rejection::Malformed)?;
    if signatures.is_empty() {
        return Err(Rejection::Malformed);
    }
    if timestamp.abs_diff(now) > tolerance.as_secs() {
        return Err(Rejection::Stale);
    }
    let matched = secrets.iter().any(|secret| {
        signatures.iter().any(|signature| {
            let mut mac = keyed(secret.as_ref(), timestamp);
            mac.update(raw_body);
            // verify_slice compares in constant time.
            mac.verify_slice(signature).is_ok()
        })
    });
    if matched {
        Ok(())
    } else {
        Err(Rejection::Mismatch)
    }
}

fn keyed(secret: &[u8], timestamp: i64) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = br#"{"run_id":"r1","status":"success"}"#;

    #[test]
    fn a_known_vector() {
        // Computed independently: printf '1700000000.%s' "$BODY" | openssl dgst -sha256 -hmac whsec
        assert_eq!(
            sign("whsec", 1_700_000_000, BODY),
            "t=1700000000,v1=d0543ebd5e41d8029cf30f73d205c30ffc1f595baa027fa6358f83f975110282"
        );
    }

    #[test]
    fn verifies_with_any_secret_of_a_rotation() {
        let header = sign("old", 1000, BODY);
        let tolerance = DEFAULT_TOLERANCE;
        assert_eq!(
            verify_header(&header, BODY, &["new", "old"], tolerance, 1000),
            Ok(())
        );
        assert_eq!(
            verify_header(&header, BODY, &["new"], tolerance, 1000),
            Err(Rejection::Mismatch)
        );
    }

    #[test]
    fn refuses_altered_bodies_stale_and_future_timestamps_and_garbage() {
        let header = sign("s", 1000, BODY);
        let tolerance = Duration::from_secs(300);
        assert_eq!(
            verify_header(&header, b"{}", &["s"], tolerance, 1000),
            Err(Rejection::Mismatch)
        );
        assert_eq!(
            verify_header(&header, BODY, &["s"], tolerance, 1300),
            Ok(())
        );
        assert_eq!(
            verify_header(&header, BODY, &["s"], tolerance, 1301),
            Err(Rejection::Stale)
        );
        assert_eq!(
            verify_header(&header, BODY, &["s"], tolerance, 699),
            Err(Rejection::Stale),
            "a timestamp from the future is refused too"
        );
        for garbage in [
            "",
            "t=1000",
            "v1=00",
            "t=x,v1=00",
            "t=1000,v1=zz",
            "t=1000,v1=abc",
            "nonsense",
        ] {
            assert_eq!(
                verify_header(garbage, BODY, &["s"], tolerance, 1000),
                Err(Rejection::Malformed),
                "{garbage:?}"
            );
        }
    }

    #[test]
    fn reads_the_header_from_a_header_map() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            verify(&headers, BODY, &["s"], DEFAULT_TOLERANCE),
            Err(Rejection::Missing)
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        headers.insert(SIGNATURE_HEADER, sign("s", now, BODY).parse().unwrap());
        assert_eq!(verify(&headers, BODY, &["s"], DEFAULT_TOLERANCE), Ok(()));
    }
}
