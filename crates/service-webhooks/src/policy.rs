//! Which URLs webhooks may go to, and how they appear in logs (scheme and host only:
//! paths and queries often carry tokens).

use url::{Host, Url};

use crate::WebhookSettings;
use crate::guard::AddressGuard;

/// The URL rules of [`WebhookSettings`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UrlPolicy {
    require_https: bool,
    allowed_hosts: Option<Vec<String>>,
    guard: AddressGuard,
}

impl UrlPolicy {
    /// The policy the settings describe.
    pub fn new(settings: &WebhookSettings) -> Self {
        Self {
            require_https: settings.require_https,
            allowed_hosts: settings.allowed_hosts.clone(),
            guard: settings.address_guard(),
        }
    }

    /// Checks a URL at run creation: absolute http(s) with a host, and https when
    /// required. The host allow-list is applied when sending (a refused host is
    /// recorded dead, so the run itself is kept).
    pub fn check(&self, url: &str) -> Result<Url, String> {
        let parsed = Url::parse(url).map_err(|error| format!("'{url}' is not a URL ({error})"))?;
        match parsed.scheme() {
            "https" => {}
            "http" if self.require_https => {
                return Err("webhooks must use https (require_https is set)".into());
            }
            "http" => {}
            other => return Err(format!("scheme '{other}' is not http or https")),
        }
        match parsed.host_str() {
            Some(host) if !host.is_empty() => Ok(parsed),
            _ => Err(format!("'{url}' has no host")),
        }
    }

    /// Checks a URL when sending: [`UrlPolicy::check`], the host allow-list, and the
    /// address guard for an IP-literal host (a name is judged once resolved, by the
    /// HTTP dispatcher). The error says why, without the `refused by policy` prefix.
    pub fn permit(&self, url: &str) -> Result<Url, String> {
        let parsed = self.check(url)?;
        let host = host_key(&parsed);
        if let Some(allowed) = &self.allowed_hosts
            && !allowed.iter().any(|pattern| host_matches(pattern, &host))
        {
            return Err(format!("host '{host}' is not in allowed_hosts"));
        }
        let literal = match parsed.host() {
            Some(Host::Ipv4(ip)) => Some(ip.into()),
            Some(Host::Ipv6(ip)) => Some(ip.into()),
            _ => None,
        };
        if let Some(ip) = literal
            && !self.guard.trusts(&host)
            && let Some(class) = self.guard.refuses(ip)
        {
            return Err(class.to_string());
        }
        Ok(parsed)
    }
}

/// A URL's host as `allowed_hosts` names it: lower case without a trailing dot, an
/// IPv6 address without brackets.
fn host_key(url: &Url) -> String {
    match url.host() {
        Some(Host::Ipv6(ip)) => ip.to_string(),
        Some(Host::Ipv4(ip)) => ip.to_string(),
        Some(Host::Domain(name)) => name.trim_end_matches('.').to_ascii_lowercase(),
        None => String::new(),
    }
}

/// `example.com` matches itself; `*.example.com` matches its subdomains.
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        None => pattern == host,
    }
}

/// A URL as logs show it: scheme and host, never path, query or credentials.
pub fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(parsed) => redact_url(&parsed),
        Err(_) => "<invalid url>".into(),
    }
}

/// [`redact`] of a parsed URL.
pub fn redact_url(url: &Url) -> String {
    format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: &str) -> UrlPolicy {
        let block = serde_json::from_str(json).unwrap();
        UrlPolicy::new(&WebhookSettings::resolve(&block, None, None).unwrap().0)
    }

    #[test]
    fn urls_must_be_absolute_http_with_a_host() {
        let open = UrlPolicy::default();
        assert!(open.check("https://example.com/hook").is_ok());
        assert!(open.check("http://127.0.0.1:9000/x").is_ok());
        assert!(open.check("/relative").is_err());
        assert!(open.check("ftp://example.com").is_err());
        assert!(open.check("http:///nohost").is_err() || open.check("http://").is_err());
        assert!(open.check("not a url").is_err());
    }

    #[test]
    fn require_https_refuses_plain_http() {
        let strict = policy(r#"{"require_https": true}"#);
        assert!(strict.check("https://example.com").is_ok());
        let refused = strict.check("http://example.com").unwrap_err();
        assert!(refused.contains("https"), "{refused}");
    }

    #[test]
    fn the_allow_list_matches_hosts_and_subdomains_when_sending() {
        let listed = policy(r#"{"allowed_hosts": ["hooks.example.com", "*.corp.dev"]}"#);
        assert!(
            listed.check("https://evil.test/x").is_ok(),
            "not applied at creation"
        );
        assert!(listed.permit("https://HOOKS.example.com/x").is_ok());
        assert!(listed.permit("https://a.b.corp.dev/x").is_ok());
        assert!(listed.permit("https://corp.dev/x").is_err());
        assert!(listed.permit("https://xcorp.dev/x").is_err());
        let refused = listed.permit("https://evil.test/x").unwrap_err();
        assert!(refused.contains("evil.test"), "{refused}");
    }

    #[test]
    fn ip_literal_hosts_are_judged_by_the_address_rules_in_every_spelling() {
        let strict = policy(r#"{"block_private_targets": true}"#);
        for (url, class) in [
            ("http://127.0.0.1:9000/x", "loopback address"),
            ("http://2130706433/x", "loopback address"),
            ("http://0x7f.1/x", "loopback address"),
            ("http://[::1]/x", "loopback address"),
            ("http://[::ffff:10.0.0.1]/x", "private address"),
            ("http://192.168.0.10/x", "private address"),
            ("http://100.64.1.1/x", "private address"),
            ("http://[fd12::1]/x", "private address"),
            ("http://0.0.0.0/x", "unspecified address"),
            ("http://224.0.0.1/x", "multicast address"),
        ] {
            assert_eq!(strict.permit(url).unwrap_err(), class, "{url}");
        }
        assert!(strict.permit("https://93.184.216.34/x").is_ok());
        assert!(
            strict.permit("https://hooks.example.com/x").is_ok(),
            "names are judged once resolved"
        );
        let open = UrlPolicy::default();
        assert!(open.permit("http://127.0.0.1:9000/x").is_ok());
        assert!(open.permit("http://10.0.0.1/x").is_ok());
    }

    #[test]
    fn metadata_addresses_are_refused_by_default_and_allowed_when_named_in_allowed_hosts() {
        let open = UrlPolicy::default();
        for url in [
            "http://169.254.169.254/latest/meta-data",
            "http://[fd00:ec2::254]/latest/meta-data",
            "http://[::ffff:169.254.169.254]/",
            "http://[fe80::1]/",
        ] {
            let refused = open.permit(url).unwrap_err();
            assert!(
                refused.contains("link-local") || refused.contains("metadata"),
                "{url}: {refused}"
            );
        }
        let named = policy(r#"{"allowed_hosts": ["169.254.169.254", "[fd00:ec2::254]"]}"#);
        assert!(
            named
                .permit("http://169.254.169.254/latest/meta-data")
                .is_ok()
        );
        assert!(
            named
                .permit("http://[fd00:ec2::254]/latest/meta-data")
                .is_ok()
        );
        let strict_named =
            policy(r#"{"allowed_hosts": ["127.0.0.1"], "block_private_targets": true}"#);
        assert!(strict_named.permit("http://127.0.0.1:9000/x").is_ok());
    }

    #[test]
    fn logs_see_scheme_and_host_only() {
        assert_eq!(
            redact("https://user:pw@hooks.example.com:8443/secret/path?token=abc"),
            "https://hooks.example.com"
        );
        assert_eq!(redact("nonsense"), "<invalid url>");
    }
}
