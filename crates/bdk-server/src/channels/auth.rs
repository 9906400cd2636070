//! A channel's own auth chain (`auth = [...]` in `channels/<id>.toml`), tried in order: the
//! first policy that admits the request decides the principal. An empty chain means the
//! server's chain (`--bearer-token`, `--allow-anonymous`, or loopback only).
//!
//! Bearer secrets are read from their environment variable once, when the channel is mounted;
//! a variable that is unset makes that policy admit nobody (and is logged), never everybody.

use std::net::SocketAddr;

use axum::http::{HeaderMap, header};
use bdk_engine::Principal;
use bdk_project::model::AuthPolicy as PolicyDef;
use subtle::ConstantTimeEq;

use crate::auth::{self, ANONYMOUS_PRINCIPAL, AuthState, BEARER_PRINCIPAL, Caller, LOCAL_PRINCIPAL, PROXY_HEADERS};
use crate::error::ApiError;

/// One resolved policy.
#[derive(Clone)]
enum Policy {
    LocalDevStrict,
    Bearer { env: String, secret: Option<Vec<u8>>, principal: String },
    AllowAll,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::LocalDevStrict => f.write_str("LocalDevStrict"),
            Policy::Bearer { env, principal, .. } => write!(f, "Bearer({env} as {principal})"),
            Policy::AllowAll => f.write_str("AllowAll"),
        }
    }
}

/// A channel's chain, ready to admit requests.
#[derive(Debug, Clone)]
pub struct Chain {
    policies: Vec<Policy>,
    server: AuthState,
}

impl Chain {
    /// Resolves `defs` (reading bearer secrets from `env`); `server` is used when `defs` is empty.
    pub fn new(channel: &str, defs: &[PolicyDef], server: AuthState, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let policies = defs
            .iter()
            .map(|def| match def {
                PolicyDef::LocalDevStrict => Policy::LocalDevStrict,
                PolicyDef::AllowAll => Policy::AllowAll,
                PolicyDef::Bearer { token_env, principal } => {
                    let secret = env(token_env).filter(|s| !s.is_empty()).map(String::into_bytes);
                    if secret.is_none() {
                        tracing::warn!(channel, env = %token_env, "bearer auth: the variable is not set, so no token is accepted");
                    }
                    Policy::Bearer {
                        env: token_env.clone(),
                        secret,
                        principal: principal.clone().unwrap_or_else(|| BEARER_PRINCIPAL.to_owned()),
                    }
                }
            })
            .collect();
        Self { policies, server }
    }

    /// Admits the request as a [`Caller`], or says why not (401).
    pub fn admit(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Result<Caller, ApiError> {
        if self.policies.is_empty() {
            return auth::authenticate(&self.server, peer, headers);
        }
        let direct_loopback = peer.is_some_and(|p| p.ip().is_loopback()) && proxy_header(headers).is_none();
        let sees_all = self.server.dev && direct_loopback;
        let presented = bearer(headers);
        let mut reasons = Vec::new();
        for policy in &self.policies {
            match policy {
                Policy::LocalDevStrict if direct_loopback => {
                    return Ok(Caller { principal: Principal::new(LOCAL_PRINCIPAL), sees_all });
                }
                Policy::LocalDevStrict => reasons.push("not a direct loopback caller".to_owned()),
                Policy::Bearer { env, secret, principal } => match (secret, presented) {
                    (Some(secret), Some(presented)) if bool::from(secret.as_slice().ct_eq(presented)) => {
                        return Ok(Caller { principal: Principal::new(principal), sees_all });
                    }
                    (Some(_), Some(_)) => reasons.push("the bearer token is not valid".to_owned()),
                    (Some(_), None) => reasons.push("no `Authorization: Bearer` token".to_owned()),
                    (None, _) => reasons.push(format!("bearer auth is not configured (${env} is unset)")),
                },
                Policy::AllowAll => return Ok(Caller { principal: Principal::new(ANONYMOUS_PRINCIPAL), sees_all }),
            }
        }
        let error = ApiError::unauthorized(format!(
            "no auth policy of this channel admitted the request: {}",
            reasons.join("; ")
        ));
        Err(if presented.is_none() { error.with_challenge("Bearer") } else { error })
    }
}

fn proxy_header(headers: &HeaderMap) -> Option<&'static str> {
    PROXY_HEADERS.into_iter().find(|name| headers.contains_key(*name))
}

fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = value.split_at(value.iter().position(|b| *b == b' ')?);
    scheme.eq_ignore_ascii_case(b"bearer").then(|| rest.trim_ascii())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::http::HeaderValue;

    use super::*;
    use crate::auth::AuthPolicy;

    fn server() -> AuthState {
        AuthState { policy: Arc::new(AuthPolicy::LocalDevStrict), dev: false }
    }

    fn chain(defs: &[PolicyDef]) -> Chain {
        Chain::new("c", defs, server(), &|name| (name == "TOKEN").then(|| "s3cret".to_owned()))
    }

    fn loopback() -> Option<SocketAddr> {
        Some(SocketAddr::from(([127, 0, 0, 1], 1)))
    }

    fn remote() -> Option<SocketAddr> {
        Some(SocketAddr::from(([192, 0, 2, 1], 1)))
    }

    fn bearer_headers(token: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static(token));
        headers
    }

    #[test]
    fn policies_are_tried_in_order() {
        let c = chain(&[
            PolicyDef::LocalDevStrict,
            PolicyDef::Bearer { token_env: "TOKEN".into(), principal: Some("ci".into()) },
        ]);
        assert_eq!(c.admit(loopback(), &HeaderMap::new()).unwrap().principal.as_str(), "local");
        assert_eq!(c.admit(remote(), &bearer_headers("Bearer s3cret")).unwrap().principal.as_str(), "ci");
        let wrong = c.admit(remote(), &bearer_headers("Bearer nope")).unwrap_err();
        assert_eq!(wrong.status.as_u16(), 401);
        assert!(wrong.message.contains("not valid"), "{}", wrong.message);
        let missing = c.admit(remote(), &HeaderMap::new()).unwrap_err();
        assert_eq!(missing.challenge, Some("Bearer"));
        let mut proxied = HeaderMap::new();
        proxied.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4"));
        assert!(c.admit(loopback(), &proxied).is_err());
    }

    #[test]
    fn an_unset_secret_admits_nobody_and_allow_all_admits_everyone() {
        let c = chain(&[PolicyDef::Bearer { token_env: "UNSET".into(), principal: None }]);
        let err = c.admit(remote(), &bearer_headers("Bearer ")).unwrap_err();
        assert!(err.message.contains("$UNSET is unset"), "{}", err.message);
        let open = chain(&[PolicyDef::AllowAll]);
        assert_eq!(open.admit(remote(), &HeaderMap::new()).unwrap().principal.as_str(), "anonymous");
        let fallback = chain(&[]);
        assert!(fallback.admit(remote(), &HeaderMap::new()).is_err());
        assert!(fallback.admit(loopback(), &HeaderMap::new()).is_ok());
    }
}
