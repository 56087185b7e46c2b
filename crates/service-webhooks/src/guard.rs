//! Which addresses a webhook may connect to, judged after DNS resolution so a name
//! cannot smuggle an internal target past a check of the URL's text. The HTTP
//! dispatcher resolves through [`GuardedResolver`], which hands the connector only
//! the addresses it checked: there is no second lookup for a rebinding DNS server to
//! answer differently. IP-literal URLs never reach a resolver; [`crate::UrlPolicy`]
//! judges them with the same [`AddressGuard`].

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address is no webhook target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AddressClass {
    /// 169.254.0.0/16, fe80::/10: where cloud metadata services answer. Always refused.
    LinkLocal,
    /// A known cloud metadata address outside link-local (fd00:ec2::254,
    /// 100.100.100.200, 192.0.0.192). Always refused.
    Metadata,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918, CGNAT 100.64.0.0/10, ULA fc00::/7, site-local fec0::/10.
    Private,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 240.0.0.0/4 and the broadcast address.
    Reserved,
}

impl std::fmt::Display for AddressClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::LinkLocal => "link-local address",
            Self::Metadata => "cloud metadata address",
            Self::Loopback => "loopback address",
            Self::Private => "private address",
            Self::Unspecified => "unspecified address",
            Self::Multicast => "multicast address",
            Self::Reserved => "reserved address",
        })
    }
}

impl AddressClass {
    /// Refused whether or not private targets are blocked.
    fn always_refused(self) -> bool {
        matches!(self, Self::LinkLocal | Self::Metadata)
    }
}

/// The class of an address that is not a public unicast one; `None` for public.
pub(crate) fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, ..] = ip.octets();
    let class = if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip == Ipv4Addr::new(100, 100, 100, 200) || ip == Ipv4Addr::new(192, 0, 0, 192) {
        AddressClass::Metadata
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private
    } else if a == 0 {
        AddressClass::Unspecified
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if a >= 240 {
        AddressClass::Reserved
    } else {
        return None;
    };
    Some(class)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    if ip.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    if ip.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64
    // (64:ff9b::a.b.c.d) forms reach the IPv4 address they carry.
    let segments = ip.segments();
    let embedded = match segments {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => {
            let [.., high, low] = segments;
            Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)))
        }
        _ => None,
    };
    if let Some(v4) = embedded {
        return classify_v4(v4);
    }
    let class = if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        AddressClass::Metadata
    } else if ip.is_unicast_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_unique_local() || segments[0] & 0xffc0 == 0xfec0 {
        AddressClass::Private
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else {
        return None;
    };
    Some(class)
}

/// The address rules of the settings: link-local and metadata addresses always,
/// every non-public class when private targets are blocked; hosts named exactly in
/// `allowed_hosts` are trusted with any address.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AddressGuard {
    block_private: bool,
    trusted: BTreeSet<String>,
}

impl AddressGuard {
    /// A guard that refuses every non-public address when `block_private`, else
    /// link-local and metadata ones only; `allowed_hosts`' exact entries (not
    /// `*.` patterns) are exempt.
    pub(crate) fn new(block_private: bool, allowed_hosts: Option<&[String]>) -> Self {
        let trusted = allowed_hosts
            .unwrap_or_default()
            .iter()
            .filter(|pattern| !pattern.starts_with("*."))
            .cloned()
            .collect();
        Self {
            block_private,
            trusted,
        }
    }

    /// Whether `host` (lower case, no trailing dot, an IPv6 address without brackets)
    /// is named exactly in `allowed_hosts`.
    pub(crate) fn trusts(&self, host: &str) -> bool {
        self.trusted.contains(host)
    }

    /// Why `ip` may not be connected to, if it may not.
    pub(crate) fn refuses(&self, ip: IpAddr) -> Option<AddressClass> {
        classify(ip).filter(|class| self.block_private || class.always_refused())
    }

    /// Whether every non-public address is refused (the dispatcher then bypasses
    /// environment proxies, which would resolve names past the check).
    pub(crate) fn blocks_private(&self) -> bool {
        self.block_private
    }
}

/// A name whose every address the guard refused; found in a failed request's error
/// chain to tell a refusal from a connection failure.
#[derive(Debug, thiserror::Error)]
#[error("{name} resolved only to refused addresses ({address}: {class})")]
pub(crate) struct Refused {
    pub(crate) name: String,
    pub(crate) address: IpAddr,
    pub(crate) class: AddressClass,
}

/// Resolves names through the system resolver and passes on only the addresses the
/// guard permits, so the connection goes to an address that was checked.
#[derive(Debug)]
pub(crate) struct GuardedResolver {
    guard: AddressGuard,
}

impl GuardedResolver {
    pub(crate) fn new(guard: AddressGuard) -> Arc<Self> {
        Arc::new(Self { guard })
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let name = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            // Port 0: the connector puts the URL's port on each address.
            let resolved = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let permitted = guard.filter(name, resolved)?;
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

impl AddressGuard {
    /// The addresses `name` resolved to that may be connected to: all of them for a
    /// trusted name, else the permitted ones; [`Refused`] when none is.
    fn filter(&self, name: String, resolved: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, Refused> {
        if self.trusts(&name) {
            return Ok(resolved);
        }
        let mut refused = None;
        let permitted: Vec<SocketAddr> = resolved
            .into_iter()
            .filter(|addr| match self.refuses(addr.ip()) {
                Some(class) => {
                    refused.get_or_insert((addr.ip(), class));
                    false
                }
                None => true,
            })
            .collect();
        match refused {
            Some((address, class)) if permitted.is_empty() => Err(Refused {
                name,
                address,
                class,
            }),
            _ => Ok(permitted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> Option<AddressClass> {
        classify(text.parse().unwrap())
    }

    #[test]
    fn non_public_addresses_are_classified() {
        use AddressClass::*;
        for (address, expected) in [
            ("127.0.0.1", Loopback),
            ("127.255.0.9", Loopback),
            ("::1", Loopback),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("100.64.0.1", Private),
            ("100.127.255.255", Private),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("169.254.169.254", LinkLocal),
            ("fe80::1", LinkLocal),
            ("fd00:ec2::254", Metadata),
            ("100.100.100.200", Metadata),
            ("0.0.0.0", Unspecified),
            ("::", Unspecified),
            ("224.0.0.1", Multicast),
            ("ff02::1", Multicast),
            ("255.255.255.255", Reserved),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:169.254.169.254", LinkLocal),
            ("::ffff:10.0.0.1", Private),
            ("64:ff9b::a9fe:a9fe", LinkLocal),
            ("::7f00:1", Loopback),
        ] {
            assert_eq!(class(address), Some(expected), "{address}");
        }
        for public in [
            "93.184.216.34",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(public), None, "{public}");
        }
    }

    #[test]
    fn link_local_and_metadata_addresses_are_refused_even_when_private_targets_are_allowed() {
        let open = AddressGuard::new(false, None);
        for refused in [
            "169.254.169.254",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:169.254.1.1",
        ] {
            assert!(
                open.refuses(refused.parse().unwrap()).is_some(),
                "{refused}"
            );
        }
        for allowed in ["127.0.0.1", "10.0.0.1", "::1", "8.8.8.8"] {
            assert_eq!(open.refuses(allowed.parse().unwrap()), None, "{allowed}");
        }
        let strict = AddressGuard::new(true, None);
        assert_eq!(
            strict.refuses("10.0.0.1".parse().unwrap()),
            Some(AddressClass::Private)
        );
        assert_eq!(strict.refuses("8.8.8.8".parse().unwrap()), None);
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter()
            .map(|ip| SocketAddr::new(ip.parse().unwrap(), 0))
            .collect()
    }

    #[test]
    fn a_resolved_answer_keeps_only_its_permitted_addresses() {
        let strict = AddressGuard::new(true, None);
        let mixed = addrs(&["10.0.0.7", "93.184.216.34", "::1"]);
        assert_eq!(
            strict.filter("mixed.example".into(), mixed).unwrap(),
            addrs(&["93.184.216.34"])
        );
        let internal = addrs(&["127.0.0.1", "10.0.0.7"]);
        let refused = strict
            .filter("rebound.example".into(), internal.clone())
            .unwrap_err();
        assert_eq!(refused.class, AddressClass::Loopback);
        let open = AddressGuard::new(false, None);
        assert_eq!(
            open.filter("lan.example".into(), internal.clone()).unwrap(),
            internal
        );
        let metadata = addrs(&["169.254.169.254"]);
        assert!(
            open.filter("metadata.google.internal".into(), metadata.clone())
                .is_err()
        );
        let named = ["metadata.google.internal".to_owned()];
        let trusting = AddressGuard::new(true, Some(&named));
        assert_eq!(
            trusting
                .filter("metadata.google.internal".into(), metadata.clone())
                .unwrap(),
            metadata
        );
    }

    #[test]
    fn only_exact_allowed_hosts_are_trusted() {
        let hosts = ["hooks.internal".to_owned(), "*.corp.dev".to_owned()];
        let guard = AddressGuard::new(true, Some(&hosts));
        assert!(guard.trusts("hooks.internal"));
        assert!(!guard.trusts("a.corp.dev"));
        assert!(!guard.trusts("corp.dev"));
    }
}
