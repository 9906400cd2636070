//! `bdk cost --url U --session ID`: the cost report of a session on a running server
//! (`GET <U>/v1/session/<ID>/cost`), printed exactly as `bdk cost --dir` prints it.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bdk_engine::CostReport;
use bdk_protocol::SessionId;
use bdk_protocol::http::ErrorResponse;

/// How long the request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The cost route of `session` under `base` (an agent's base URL: `http://HOST:PORT/<slug>`, or
/// the server's root under `--mode single`). A trailing `/` or `/v1` is tolerated.
pub fn cost_url(base: &str, session: &SessionId) -> String {
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/session/{session}/cost")
}

/// Fetches the report; `token` is sent as `Authorization: Bearer`.
pub fn fetch(base: &str, session: &SessionId, token: Option<&str>) -> anyhow::Result<CostReport> {
    let url = cost_url(base, session);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(TIMEOUT).build().context("building the HTTP client")?;
        let mut request = client.get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.with_context(|| format!("GET {url}"))?;
        let status = response.status();
        let body = response.bytes().await.with_context(|| format!("reading the answer of GET {url}"))?;
        if !status.is_success() {
            match serde_json::from_slice::<ErrorResponse>(&body) {
                Ok(err) => bail!("GET {url}: {} {}: {}", status.as_u16(), err.error, err.message),
                Err(_) => bail!("GET {url}: HTTP {status}"),
            }
        }
        serde_json::from_slice::<CostReport>(&body).with_context(|| format!("GET {url}: not a cost report"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised() {
        let id = SessionId::parse("ses_abc").unwrap();
        for base in ["http://h:1/hello", "http://h:1/hello/", "http://h:1/hello/v1", "http://h:1/hello/v1/"] {
            assert_eq!(cost_url(base, &id), "http://h:1/hello/v1/session/ses_abc/cost");
        }
    }
}
