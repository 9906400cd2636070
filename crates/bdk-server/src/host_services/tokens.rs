//! The capability tokens behind `BDK_HOST_TOKEN`: one per running tool call, bound to the agent
//! and the call's [`HostScope`] (session, call, principal), minted when the call starts and
//! revoked when it returns.
//!
//! The table is in memory on purpose. A token is valid only while its call runs, and no call
//! outlives the process running it (a restart fails every open turn), so a token written to disk
//! could never be valid again after a restart; keeping it in memory also means it never lands in
//! the state directory a command can read.
//!
//! Tokens are 256 random bits from the OS (`bdkh_` + 64 hex digits): unguessable, so presenting
//! one is proof of being the call it was handed to (or of having been given it by that call).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bdk_engine::{HostAuthority, HostScope};
use bdk_tools::HostAccess;

use crate::state::Mode;

const PREFIX: &str = "bdkh_";

/// The live host tokens of one server, shared by every mounted agent. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct HostTokens {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    grants: Mutex<HashMap<String, Grant>>,
    endpoint: OnceLock<Endpoint>,
}

#[derive(Debug, Clone)]
struct Grant {
    slug: String,
    scope: HostScope,
}

/// Where commands reach the host routes.
#[derive(Debug, Clone)]
struct Endpoint {
    /// `http://127.0.0.1:<port>` (loopback when the listener is bound to every address).
    origin: String,
    /// The address commands connect to: a peer at it is on this machine.
    ip: IpAddr,
    mode: Mode,
}

/// What a valid token stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub slug: String,
    pub scope: HostScope,
}

impl HostTokens {
    pub fn new() -> Self {
        Self::default()
    }

    /// The [`HostAuthority`] to put in the agent `slug`'s `EngineOptions`.
    pub fn authority(&self, slug: &str) -> Arc<dyn HostAuthority> {
        Arc::new(AgentAuthority { slug: slug.to_owned(), tokens: self.clone() })
    }

    /// Records the listener's address, so grants can name a URL. Until then (no listener: a
    /// router driven in-process) grants return `None` and commands get no host access. The
    /// first call wins.
    pub fn bind(&self, local: SocketAddr, mode: Mode) {
        let ip = match local.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let origin = format!("http://{}", SocketAddr::new(ip, local.port()));
        let _ = self.inner.endpoint.set(Endpoint { origin, ip, mode });
    }

    /// Whether `peer` is on this machine: a loopback address, or the address commands are told
    /// to connect to (a listener bound to one non-loopback interface).
    pub fn is_local(&self, peer: IpAddr) -> bool {
        peer.is_loopback() || self.inner.endpoint.get().is_some_and(|e| e.ip == peer)
    }

    /// What `token` stands for, if it is live. Unknown, revoked and malformed tokens are `None`.
    pub fn resolve(&self, token: &str) -> Option<Resolved> {
        if !token.starts_with(PREFIX) {
            return None;
        }
        self.grants().get(token).map(|g| Resolved { slug: g.slug.clone(), scope: g.scope.clone() })
    }

    /// How many tokens are live (one per running tool call).
    pub fn live(&self) -> usize {
        self.grants().len()
    }

    fn grants(&self) -> MutexGuard<'_, HashMap<String, Grant>> {
        self.inner.grants.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn grant(&self, slug: &str, scope: &HostScope) -> Option<HostAccess> {
        let endpoint = self.inner.endpoint.get()?;
        let token = fresh_token()?;
        let base = match endpoint.mode {
            Mode::Multi => format!("/{slug}"),
            Mode::Single => String::new(),
        };
        let url = format!("{}{base}/v1/host", endpoint.origin);
        self.grants().insert(token.clone(), Grant { slug: slug.to_owned(), scope: scope.clone() });
        Some(HostAccess { url, token })
    }

    fn revoke(&self, token: &str) {
        self.grants().remove(token);
    }
}

/// One agent's view of the table.
#[derive(Debug)]
struct AgentAuthority {
    slug: String,
    tokens: HostTokens,
}

impl HostAuthority for AgentAuthority {
    fn grant(&self, scope: &HostScope) -> Option<HostAccess> {
        self.tokens.grant(&self.slug, scope)
    }

    fn revoke(&self, access: &HostAccess) {
        self.tokens.revoke(&access.token);
    }
}

/// `bdkh_` + 64 hex digits of OS randomness; `None` only if the OS source fails (then the call
/// simply gets no host access).
fn fresh_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    if let Err(error) = bdk_protocol::ids::os_random(&mut bytes) {
        tracing::error!(%error, "no randomness for a host token; the call gets no host access");
        return None;
    }
    let mut token = String::with_capacity(PREFIX.len() + 64);
    token.push_str(PREFIX);
    bdk_protocol::ids::push_hex(&mut token, &bytes);
    Some(token)
}

#[cfg(test)]
mod tests {
    use bdk_protocol::{CallId, SessionId};

    use super::*;

    fn scope() -> HostScope {
        HostScope::session(SessionId::generate(), CallId::generate("t"))
    }

    #[test]
    fn no_listener_no_grant() {
        let tokens = HostTokens::new();
        assert_eq!(tokens.authority("a").grant(&scope()), None);
        assert_eq!(tokens.live(), 0);
    }

    #[test]
    fn a_grant_resolves_until_revoked() {
        let tokens = HostTokens::new();
        tokens.bind("0.0.0.0:4000".parse().unwrap(), Mode::Multi);
        let authority = tokens.authority("weather");
        let scope = scope();
        let access = authority.grant(&scope).unwrap();
        assert_eq!(access.url, "http://127.0.0.1:4000/weather/v1/host");
        assert!(access.token.starts_with("bdkh_") && access.token.len() == 5 + 64);
        assert_eq!(tokens.resolve(&access.token), Some(Resolved { slug: "weather".into(), scope: scope.clone() }));
        assert_eq!(tokens.live(), 1);

        let other = authority.grant(&scope).unwrap();
        assert_ne!(other.token, access.token, "every grant is a fresh token");
        authority.revoke(&access);
        authority.revoke(&access);
        assert_eq!(tokens.resolve(&access.token), None);
        assert!(tokens.resolve(&other.token).is_some());
        authority.revoke(&other);
        assert_eq!(tokens.live(), 0);
    }

    #[test]
    fn forged_tokens_resolve_to_nothing() {
        let tokens = HostTokens::new();
        tokens.bind("127.0.0.1:1".parse().unwrap(), Mode::Single);
        let access = tokens.authority("a").grant(&scope()).unwrap();
        assert_eq!(access.url, "http://127.0.0.1:1/v1/host");
        for forged in ["", "bdkh_", "bdkh_00", &access.token[..access.token.len() - 1], &access.token.to_uppercase()] {
            assert_eq!(tokens.resolve(forged), None, "{forged}");
        }
    }

    #[test]
    fn locality() {
        let tokens = HostTokens::new();
        tokens.bind("10.0.0.5:80".parse().unwrap(), Mode::Multi);
        assert!(tokens.is_local("127.0.0.1".parse().unwrap()));
        assert!(tokens.is_local("::1".parse().unwrap()));
        assert!(tokens.is_local("10.0.0.5".parse().unwrap()));
        assert!(!tokens.is_local("10.0.0.6".parse().unwrap()));
    }
}
