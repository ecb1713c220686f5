//! Certificates valid from a year 1950 to 1969.
//!
//! RFC 5280 §4.1.2.5.1 reads a UTCTime year YY of 50 or more as 19YY, but
//! `der` 0.8 cannot hold a time before 1970, so `x509-cert` refuses such a
//! certificate outright. This module reads the notBefore itself and makes
//! a copy of the DER in which that one UTCTime says 1970-01-01T00:00:00Z,
//! a value of the same length, for `x509-cert` to decode. The certificate
//! keeps its original DER: the signature is checked over the original
//! TBSCertificate bytes, and [`super::Certificate::not_before`] is the real
//! time read here. Only the decoded tree ([`super::Certificate::x509`])
//! carries the later, stand-in time. See `docs/book/src/pre-1970-utctime.md`.
//!
//! A notAfter before 1970 stays refused: such a certificate expired more
//! than half a century ago.

use super::layout::{Layout, tlv};
use time::{Date, Month, OffsetDateTime, Time};

/// What a UTCTime before 1970 is replaced with in the decodable copy.
const STAND_IN: &[u8; 13] = b"700101000000Z";

/// The DER `x509-cert` can decode and the real notBefore, when `der` is a
/// certificate whose notBefore is a well-formed UTCTime of 1950 to 1969;
/// `None` otherwise (the caller then reports the decoder's own error).
pub(crate) fn decodable(der: &[u8]) -> Option<(Vec<u8>, OffsetDateTime)> {
    let layout = Layout::of(der)?;
    let (0x30, content, _) = tlv(der, layout.validity.start())? else {
        return None;
    };
    // notBefore, a UTCTime (tag 23).
    let (0x17, start, end) = tlv(der, content)? else {
        return None;
    };
    let not_before = utc_time_before_1970(der.get(start..end)?)?;
    let mut copy = der.to_vec();
    copy.get_mut(start..end)?.copy_from_slice(STAND_IN);
    Some((copy, not_before))
}

/// A DER UTCTime (`YYMMDDHHMMSSZ`, RFC 5280 §4.1.2.5.1) whose year is
/// 1950 to 1969.
fn utc_time_before_1970(value: &[u8]) -> Option<OffsetDateTime> {
    let [y0, y1, m0, m1, d0, d1, h0, h1, n0, n1, s0, s1, b'Z'] = *value else {
        return None;
    };
    let two = |a: u8, b: u8| -> Option<u8> {
        (a.is_ascii_digit() && b.is_ascii_digit()).then(|| (a - b'0') * 10 + (b - b'0'))
    };
    let yy = two(y0, y1)?;
    if !(50..=69).contains(&yy) {
        return None;
    }
    let month = Month::try_from(two(m0, m1)?).ok()?;
    let date = Date::from_calendar_date(1900 + i32::from(yy), month, two(d0, d1)?).ok()?;
    // Seconds run to 59: DER UTCTime has no leap second.
    let time = Time::from_hms(two(h0, h1)?, two(n0, n1)?, two(s0, s1)?).ok()?;
    Some(date.with_time(time).assume_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn reads_utc_times_of_1950_to_1969_only() {
        assert_eq!(
            utc_time_before_1970(b"500101120000Z"),
            Some(datetime!(1950-01-01 12:00 UTC))
        );
        assert_eq!(
            utc_time_before_1970(b"691231235959Z"),
            Some(datetime!(1969-12-31 23:59:59 UTC))
        );
        assert_eq!(
            utc_time_before_1970(b"600229000000Z"),
            Some(datetime!(1960-02-29 00:00 UTC))
        );
        for bad in [
            &b"700101000000Z"[..],
            b"490101000000Z",
            b"500101000000",
            b"5001010000Z",
            b"500101000000+0000",
            b"501301000000Z",
            b"500230000000Z",
            b"610229000000Z",
            b"500101240000Z",
            b"500101000060Z",
            b"5a0101000000Z",
            b"500101000000z",
        ] {
            assert_eq!(utc_time_before_1970(bad), None, "{bad:?}");
        }
    }
}
