//! The subjectAltName: its entries, decoded on demand or read in place
//! from the certificate's bytes.

use super::{Certificate, extensions};
use der::Decode;
use std::net::IpAddr;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

impl Certificate {
    /// subjectAltName entries, in certificate order.
    pub fn subject_alt_names(&self) -> &[GeneralName] {
        let Some(value) = self.san_value() else {
            return &[];
        };
        self.0.memo.more().san.get_or_init(|| {
            // Decoded when the certificate was parsed: cannot fail.
            SubjectAltName::from_der(value)
                .map(|san| san.0)
                .unwrap_or_default()
        })
    }

    fn san_value(&self) -> Option<&[u8]> {
        self.0.san.as_ref().map(|san| san.get(&self.0.der))
    }

    /// The subjectAltName entries with tag `tag`, read from the DER.
    fn san_entries(&self, tag: u8) -> impl Iterator<Item = &[u8]> {
        self.san_value()
            .into_iter()
            .flat_map(extensions::san_entries)
            .filter_map(move |(t, bytes)| (t == tag).then_some(bytes))
    }

    /// DNS names of the subjectAltName.
    pub fn dns_names(&self) -> Vec<String> {
        self.dns_names_iter().map(str::to_string).collect()
    }

    /// DNS names of the subjectAltName, in order, without copying them.
    pub fn dns_names_iter(&self) -> impl Iterator<Item = &str> {
        // [2] IMPLICIT IA5String: ASCII, checked when parsed.
        self.san_entries(0x82)
            .filter_map(|name| std::str::from_utf8(name).ok())
    }

    /// Whether the subjectAltName holds exactly the names issuance writes
    /// for `dns_names` and `ip_addresses`: the DNS names lowercased, and the
    /// IP addresses, each list in the order given (entries of other types
    /// are not compared). One pass over the extension's bytes, without
    /// allocating: the check a reconcile makes of every leaf it holds.
    pub fn has_names_in_order<S: AsRef<str>>(
        &self,
        dns_names: &[S],
        ip_addresses: &[IpAddr],
    ) -> bool {
        let mut dns = dns_names.iter();
        let mut ips = ip_addresses.iter();
        let entries = self
            .san_value()
            .into_iter()
            .flat_map(extensions::san_entries);
        for (tag, bytes) in entries {
            let same = match tag {
                // [2] IMPLICIT IA5String.
                0x82 => dns.next().is_some_and(|want| {
                    let want = want.as_ref().as_bytes();
                    want.len() == bytes.len()
                        && want
                            .iter()
                            .zip(bytes)
                            .all(|(w, h)| w.to_ascii_lowercase() == *h)
                }),
                // [7] IMPLICIT OCTET STRING, of four or sixteen bytes.
                0x87 => ips.next().is_some_and(|want| match want {
                    IpAddr::V4(v4) => v4.octets() == bytes,
                    IpAddr::V6(v6) => v6.octets() == bytes,
                }),
                _ => true,
            };
            if !same {
                return false;
            }
        }
        dns.next().is_none() && ips.next().is_none()
    }

    /// IP addresses of the subjectAltName (malformed lengths are skipped).
    pub fn ip_addresses(&self) -> Vec<IpAddr> {
        self.ip_addresses_iter().collect()
    }

    /// IP addresses of the subjectAltName, in order (malformed lengths are
    /// skipped), without collecting them.
    pub fn ip_addresses_iter(&self) -> impl Iterator<Item = IpAddr> + '_ {
        // [7] IMPLICIT OCTET STRING.
        self.san_entries(0x87).filter_map(|ip| match ip.len() {
            4 => <[u8; 4]>::try_from(ip).ok().map(IpAddr::from),
            16 => <[u8; 16]>::try_from(ip).ok().map(IpAddr::from),
            _ => None,
        })
    }
}
