//! The HTTP auth chain of the session API: who may call, and as which principal.
//!
//! - `localDevStrict` (the default): the peer must be a loopback address and the request must
//!   carry no proxy-forwarding header (`Forwarded`, `X-Forwarded-For`, `X-Forwarded-Host`,
//!   `X-Forwarded-Proto`, `X-Real-IP`), since a local reverse proxy would otherwise make every
//!   remote caller look local. Principal `local`.
//! - `--bearer-token SECRET` (repeatable): `Authorization: Bearer SECRET`. `NAME=SECRET` names
//!   the principal; an unnamed secret is principal `bearer`. Secrets are compared in constant
//!   time, and every configured secret is compared on every request.
//! - `--allow-anonymous`: every request is admitted as principal `anonymous`. Combined with
//!   bearer tokens, a request with a valid token is its principal, one with no token is
//!   anonymous, and one with a wrong token is refused.
//!
//! The admitted caller goes into the request's extensions as a [`Caller`]. Host routes and the
//! per-agent `health`/`meta` routes run no auth; `routes` decides which routes get this layer.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use bdk_engine::{ListScope, Principal};

use crate::error::ApiError;

/// Headers a reverse proxy adds; their presence means the TCP peer is not the real client.
pub const PROXY_HEADERS: [&str; 5] =
    ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip"];

/// The principal of unnamed bearer secrets.
pub const BEARER_PRINCIPAL: &str = "bearer";
/// The principal of loopback callers under `localDevStrict`.
pub const LOCAL_PRINCIPAL: &str = "local";
/// The principal of unauthenticated callers under `--allow-anonymous`.
pub const ANONYMOUS_PRINCIPAL: &str = "anonymous";

/// One accepted bearer secret and the principal it authenticates.
#[derive(Clone)]
pub struct BearerToken {
    pub principal: Principal,
    secret: Vec<u8>,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerToken").field("principal", &self.principal).field("secret", &"<redacted>").finish()
    }
}

impl BearerToken {
    /// Parses a `--bearer-token` value: `NAME=SECRET` or a bare `SECRET`.
    ///
    /// A value is named when the part before the first `=` is a name (`[A-Za-z][A-Za-z0-9_.-]*`)
    /// and the rest is a non-empty secret that is not only `=` characters (so a base64 secret
    /// ending in `==` stays one unnamed secret).
    pub fn parse(value: &str) -> Result<Self, String> {
        if value.is_empty() {
            return Err("a bearer token may not be empty".into());
        }
        if let Some((name, secret)) = value.split_once('=') {
            let is_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if is_name && !secret.is_empty() && !secret.chars().all(|c| c == '=') {
                return Ok(Self::named(name, secret));
            }
        }
        Ok(Self { principal: Principal::new(BEARER_PRINCIPAL), secret: value.as_bytes().to_vec() })
    }

    pub fn named(principal: &str, secret: &str) -> Self {
        Self { principal: Principal::new(principal), secret: secret.as_bytes().to_vec() }
    }
}

/// Which callers the session API admits.
#[derive(Debug, Clone)]
pub enum AuthPolicy {
    /// Loopback peers only, no proxy headers.
    LocalDevStrict,
    /// Bearer secrets; with `anonymous`, a request without a token is admitted as `anonymous`.
    Bearer { tokens: Vec<BearerToken>, anonymous: bool },
    /// Everyone, as `anonymous`.
    AllowAnonymous,
}

impl AuthPolicy {
    /// The policy the `serve` flags describe.
    pub fn from_flags(tokens: Vec<BearerToken>, allow_anonymous: bool) -> Self {
        match (tokens.is_empty(), allow_anonymous) {
            (true, false) => AuthPolicy::LocalDevStrict,
            (true, true) => AuthPolicy::AllowAnonymous,
            (false, anonymous) => AuthPolicy::Bearer { tokens, anonymous },
        }
    }

    /// A word for the startup line and `/v1/meta`.
    pub fn name(&self) -> &'static str {
        match self {
            AuthPolicy::LocalDevStrict => "localDevStrict",
            AuthPolicy::Bearer { anonymous: false, .. } => "bearer",
            AuthPolicy::Bearer { anonymous: true, .. } => "bearer+anonymous",
            AuthPolicy::AllowAnonymous => "allowAll",
        }
    }

    fn allows_anonymous(&self) -> bool {
        matches!(self, AuthPolicy::AllowAnonymous | AuthPolicy::Bearer { anonymous: true, .. })
    }
}

/// The admitted caller, in the request's extensions.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    /// Whether listings show every principal's sessions (`--dev` on loopback, or anonymous
    /// access allowed).
    pub sees_all: bool,
}

impl Caller {
    pub fn list_scope(&self) -> ListScope {
        if self.sees_all { ListScope::All } else { ListScope::Owner(self.principal.clone()) }
    }
}

/// What the auth layer needs.
#[derive(Debug, Clone)]
pub struct AuthState {
    pub policy: Arc<AuthPolicy>,
    pub dev: bool,
}

/// Decides whether a request is admitted, and as whom.
pub fn authenticate(state: &AuthState, peer: Option<SocketAddr>, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let direct_loopback = peer.is_some_and(|p| p.ip().is_loopback()) && proxy_header(headers).is_none();
    let sees_all = state.policy.allows_anonymous() || (state.dev && direct_loopback);
    let principal = match state.policy.as_ref() {
        AuthPolicy::AllowAnonymous => Principal::new(ANONYMOUS_PRINCIPAL),
        AuthPolicy::LocalDevStrict => {
            if let Some(name) = proxy_header(headers) {
                return Err(ApiError::unauthorized(format!(
                    "requests forwarded by a proxy ({name} header) are refused by the default loopback-only \
                     auth; serve with --bearer-token to accept them"
                )));
            }
            if !peer.is_some_and(|p| p.ip().is_loopback()) {
                return Err(ApiError::unauthorized(
                    "only loopback callers are admitted by the default auth; serve with --bearer-token",
                ));
            }
            Principal::new(LOCAL_PRINCIPAL)
        }
        AuthPolicy::Bearer { tokens, anonymous } => match bearer(headers) {
            Some(presented) => match matching_token(tokens, presented) {
                Some(token) => token.principal.clone(),
                None => {
                    return Err(ApiError::unauthorized("the bearer token is not valid").with_challenge("Bearer"));
                }
            },
            None if *anonymous => Principal::new(ANONYMOUS_PRINCIPAL),
            None => {
                return Err(ApiError::unauthorized("send Authorization: Bearer <token>").with_challenge("Bearer"));
            }
        },
    };
    Ok(Caller { principal, sees_all })
}

/// The auth middleware: admits the request (putting its [`Caller`] in the extensions) or
/// answers 401.
pub async fn require(State(state): State<AuthState>, mut request: Request, next: Next) -> Result<Response, ApiError> {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let caller = authenticate(&state, peer, request.headers())?;
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}

/// The first proxy-forwarding header present, if any.
fn proxy_header(headers: &HeaderMap) -> Option<&'static str> {
    PROXY_HEADERS.into_iter().find(|name| headers.contains_key(*name))
}

/// The bearer secret of the `Authorization` header.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = value.split_at(value.iter().position(|b| *b == b' ')?);
    scheme.eq_ignore_ascii_case(b"bearer").then(|| rest.trim_ascii())
}

/// Compares `presented` with every token (no early exit) and returns the match.
fn matching_token<'a>(tokens: &'a [BearerToken], presented: &[u8]) -> Option<&'a BearerToken> {
    let mut found = None;
    for token in tokens {
        if constant_time_eq(&token.secret, presented) && found.is_none() {
            found = Some(token);
        }
    }
    found
}

/// Equality whose time depends on the lengths only, never on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn state(policy: AuthPolicy, dev: bool) -> AuthState {
        AuthState { policy: Arc::new(policy), dev }
    }

    fn loopback() -> Option<SocketAddr> {
        Some(SocketAddr::from(([127, 0, 0, 1], 5000)))
    }

    fn remote() -> Option<SocketAddr> {
        Some(SocketAddr::from(([192, 0, 2, 7], 5000)))
    }

    fn with(name: &'static str, value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn token_values_parse_names_and_keep_base64_padding() {
        let named = BearerToken::parse("alice=s3cret").unwrap();
        assert_eq!(named.principal.as_str(), "alice");
        assert_eq!(named.secret, b"s3cret");
        let padded = BearerToken::parse("abc==").unwrap();
        assert_eq!(padded.principal.as_str(), BEARER_PRINCIPAL);
        assert_eq!(padded.secret, b"abc==");
        let bare = BearerToken::parse("9x=y").unwrap();
        assert_eq!(bare.principal.as_str(), BEARER_PRINCIPAL);
        assert!(BearerToken::parse("").is_err());
        assert!(!format!("{named:?}").contains("s3cret"));
    }

    #[test]
    fn local_dev_strict_admits_loopback_only_and_refuses_proxies() {
        let s = state(AuthPolicy::LocalDevStrict, false);
        let caller = authenticate(&s, loopback(), &HeaderMap::new()).unwrap();
        assert_eq!(caller.principal.as_str(), LOCAL_PRINCIPAL);
        assert!(!caller.sees_all);
        assert_eq!(authenticate(&s, remote(), &HeaderMap::new()).unwrap_err().status.as_u16(), 401);
        assert_eq!(authenticate(&s, None, &HeaderMap::new()).unwrap_err().status.as_u16(), 401);
        for name in PROXY_HEADERS {
            let err = authenticate(&s, loopback(), &with(name, "1.2.3.4")).unwrap_err();
            assert_eq!(err.status.as_u16(), 401, "{name}");
        }
    }

    #[test]
    fn bearer_tokens_name_principals() {
        let tokens = vec![BearerToken::named("alice", "a-secret"), BearerToken::named("bob", "b-secret")];
        let s = state(AuthPolicy::from_flags(tokens.clone(), false), false);
        let caller = authenticate(&s, remote(), &with("authorization", "Bearer b-secret")).unwrap();
        assert_eq!(caller.principal.as_str(), "bob");
        assert!(!caller.sees_all);
        let lower = authenticate(&s, remote(), &with("authorization", "bearer a-secret")).unwrap();
        assert_eq!(lower.principal.as_str(), "alice");
        let missing = authenticate(&s, loopback(), &HeaderMap::new()).unwrap_err();
        assert_eq!(missing.status.as_u16(), 401);
        assert_eq!(missing.challenge, Some("Bearer"));
        assert!(authenticate(&s, remote(), &with("authorization", "Bearer a-secre")).is_err());
        assert!(authenticate(&s, remote(), &with("authorization", "Basic a-secret")).is_err());

        let open = state(AuthPolicy::from_flags(tokens, true), false);
        assert_eq!(authenticate(&open, remote(), &HeaderMap::new()).unwrap().principal.as_str(), ANONYMOUS_PRINCIPAL);
        assert!(authenticate(&open, remote(), &with("authorization", "Bearer wrong")).is_err());
    }

    #[test]
    fn listing_scope_widens_under_dev_on_loopback_or_anonymous() {
        let dev = state(AuthPolicy::LocalDevStrict, true);
        assert!(authenticate(&dev, loopback(), &HeaderMap::new()).unwrap().sees_all);
        let dev_bearer = state(AuthPolicy::from_flags(vec![BearerToken::named("a", "s")], false), true);
        let auth = with("authorization", "Bearer s");
        assert!(authenticate(&dev_bearer, loopback(), &auth).unwrap().sees_all);
        assert!(!authenticate(&dev_bearer, remote(), &auth).unwrap().sees_all);
        let anonymous = state(AuthPolicy::AllowAnonymous, false);
        assert!(authenticate(&anonymous, remote(), &HeaderMap::new()).unwrap().sees_all);
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
