//! The web surface: the OpenAPI document lists every route the router serves and nothing it
//! does not (checked both against the route modules' source and against a live router), the
//! docs site renders every embedded page with links that resolve, and the playground page and
//! its assets are served per agent and removed by `--no-playground` / `--no-docs`.

use std::collections::BTreeSet;
use std::path::Path;

use bdk_server::Mode;
use bdk_server::openapi::{self, Scope};
use serde_json::{Value, json};

use super::support::host as new_host;

/// Every `.route("PATH", ...)` in the crate's source, with the methods of its method router.
fn routes_in_source() -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (route, methods) in route_calls(&text) {
                    for method in methods {
                        found.insert((method, route.clone()));
                    }
                }
            }
        }
    }
    found
}

/// `(path, methods)` of each `.route("path", <method router>)` and `.route_service("path", ..)`
/// call in `text`. A service (the MCP endpoint) and an `any(..)` router (channel webhooks) are
/// listed as POST, the method their clients use; the others answer 405 or the channel's own 404.
fn route_calls(text: &str) -> Vec<(String, Vec<String>)> {
    const CALLS: [&str; 2] = [".route(\"", ".route_service(\""];
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((at, needle)) =
        CALLS.iter().filter_map(|needle| rest.find(needle).map(|at| (at, *needle))).min_by_key(|(at, _)| *at)
    {
        let after = &rest[at + needle.len()..];
        let Some(end) = after.find('"') else { break };
        let path = after[..end].to_owned();
        // The call's argument list: up to the matching close parenthesis.
        let mut depth = 1;
        let mut args_end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        args_end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let args = &after[end + 1..args_end];
        let mut methods = Vec::new();
        if needle.contains("service") {
            methods.push("POST".to_owned());
        }
        for method in ["get", "post", "put", "delete", "patch", "any"] {
            let needle = format!("{method}(");
            let mut from = 0;
            while let Some(pos) = args[from..].find(&needle) {
                let abs = from + pos;
                let before = args[..abs].chars().last();
                if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    methods.push(if method == "any" { "POST".to_owned() } else { method.to_ascii_uppercase() });
                    break;
                }
                from = abs + needle.len();
            }
        }
        out.push((path, methods));
        rest = &after[end..];
    }
    out
}

#[test]
fn the_source_parser_reads_method_chains() {
    let calls =
        route_calls(r#"Router::new().route("/a/{id}", get(list_runs).post(start)).route("/b", post(get_thing))"#);
    assert_eq!(calls, vec![("/a/{id}".into(), vec!["GET".into(), "POST".into()]), ("/b".into(), vec!["POST".into()])]);
    let calls = route_calls(r#"Router::new().route_service("/m", svc).route("/c/{x}", any(dispatch))"#);
    assert_eq!(calls, vec![("/m".into(), vec!["POST".into()]), ("/c/{x}".into(), vec!["POST".into()])]);
}

#[test]
fn every_route_in_the_router_source_is_in_the_catalog_and_back() {
    let source = routes_in_source();
    assert!(source.len() > 30, "the source scan found too few routes: {source:?}");
    let catalog: BTreeSet<(String, String)> =
        openapi::catalog().iter().map(|op| (op.method.to_owned(), op.path.to_owned())).collect();
    let missing: Vec<_> = source.difference(&catalog).collect();
    assert!(
        missing.is_empty(),
        "routes served but not in the OpenAPI catalog (add one line each to \
         crates/bdk-server/src/openapi/catalog.rs): {missing:?}"
    );
    let stale: Vec<_> = catalog.difference(&source).collect();
    assert!(stale.is_empty(), "catalog entries no route module serves: {stale:?}");
}

/// A concrete URL path for a catalog path: each parameter filled with a placeholder.
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').unwrap();
        out.push_str("x1");
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_catalog_route_is_served_by_the_live_router_in_both_layouts() {
    for mode in [Mode::Multi, Mode::Single] {
        let host = new_host()
            .options(|o| {
                o.mode = mode;
                o.dev = true;
                o.control_plane = false;
            })
            .start()
            .await;
        let document = openapi::document(&host.state);
        let paths = document["paths"].as_object().unwrap();
        for op in openapi::catalog() {
            if !openapi::served(&op, &host.state.options) {
                continue;
            }
            let prefix = if op.scope == Scope::Agent && mode == Mode::Multi { "/hello" } else { "" };
            let url = format!("{}{prefix}{}", host.origin, concrete(op.path));
            let method = reqwest::Method::from_bytes(op.method.as_bytes()).unwrap();
            let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
            let mut request = client.request(method, &url);
            if op.method == "POST" {
                request = request.header("content-type", "application/json").body("{}");
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let text = response.text().await.unwrap();
            assert!(
                !(text.contains("\"route_not_found\"") || text.contains("\"method_not_allowed\"")),
                "{mode:?}: {} {url} is in the catalog but not routed: {status} {text}",
                op.method
            );
            assert!(status < 500, "{mode:?}: {} {url}: {status} {text}", op.method);
            let doc_path =
                if prefix.is_empty() { op.openapi_path() } else { format!("/{{agent}}{}", op.openapi_path()) };
            assert!(
                paths.get(&doc_path).and_then(|item| item.get(op.method.to_ascii_lowercase())).is_some(),
                "{mode:?}: {} {doc_path} is served but not in the document",
                op.method
            );
        }
        host.shutdown().await;
    }
}

/// Every `$ref` in `value`.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "$ref" {
                    out.push(value.as_str().unwrap_or_default().to_owned());
                } else {
                    refs(value, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_openapi_3_1_with_resolvable_schemas_and_follows_the_options() {
    let host = new_host().agents(&["alpha", "beta"]).start().await;
    let response = host.client.get(format!("{}/v1/openapi.json", host.origin)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["openapi"], json!("3.1.0"));
    let paths = document["paths"].as_object().unwrap();
    let start = &paths["/{agent}/v1/session"]["post"];
    assert_eq!(start["parameters"][0]["schema"]["enum"], json!(["alpha", "beta"]));
    let body = &start["requestBody"]["content"]["application/json"]["schema"];
    let mut found = Vec::new();
    refs(&document, &mut found);
    assert!(!found.is_empty());
    for reference in found {
        let name = reference.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{reference}"));
        assert!(document["components"]["schemas"].get(name).is_some(), "{reference} does not resolve");
    }
    let request = body["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
    let schema = &document["components"]["schemas"][request];
    assert_eq!(schema["required"], json!(["message"]), "{schema}");
    assert!(schema["properties"]["dryRun"].is_object() && schema["properties"]["asOf"].is_object(), "{schema}");
    // Routes the options leave out are not described.
    assert!(!paths.contains_key("/{agent}/v1/dev/schedules/{id}"));
    assert!(!paths.contains_key("/{agent}/v1/internal/schedules/{id}/fire"));
    assert!(paths.contains_key("/docs") && paths.contains_key("/{agent}/playground"));
    host.shutdown().await;

    let host = new_host().options(|o| {
        o.playground = false;
        o.docs = false;
    });
    let host = host.start().await;
    let document: Value =
        host.client.get(format!("{}/v1/openapi.json", host.origin)).send().await.unwrap().json().await.unwrap();
    let paths = document["paths"].as_object().unwrap();
    for gone in ["/docs", "/{agent}/playground", "/", "/v1/agents"] {
        assert!(!paths.contains_key(gone), "{gone} is listed under --no-playground --no-docs");
    }
    host.shutdown().await;
}

/// The `href` values of a page.
fn hrefs(page: &str) -> Vec<String> {
    page.split("href=\"").skip(1).filter_map(|rest| rest.split('"').next()).map(|h| h.replace("&amp;", "&")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_site_renders_every_page_and_every_link_resolves() {
    let host = new_host().start().await;
    let urls = bdk_server::web::docs::urls();
    for expected in ["/docs", "/docs/http", "/docs/cli", "/docs/formats", "/docs/decisions", "/docs/CONTRIBUTING"] {
        assert!(urls.iter().any(|u| u == expected), "{expected} missing from {urls:?}");
    }
    let mut checked = 0;
    for url in &urls {
        let response = host.client.get(format!("{}{url}", host.origin)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
        let page = response.text().await.unwrap();
        for href in hrefs(&page) {
            if href.starts_with("http://")
                || href.starts_with("https://")
                || href.starts_with("mailto:")
                || href.starts_with("data:")
            {
                continue;
            }
            let (path, fragment) = match href.split_once('#') {
                Some((path, fragment)) => (if path.is_empty() { url.as_str() } else { path }, Some(fragment)),
                None => (href.as_str(), None),
            };
            assert!(path.starts_with('/'), "{url}: relative link {href} left unrewritten");
            let target = host.client.get(format!("{}{path}", host.origin)).send().await.unwrap();
            assert_eq!(target.status(), 200, "{url}: link {href} is broken");
            if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
                let text = target.text().await.unwrap();
                assert!(text.contains(&format!("id=\"{fragment}\"")), "{url}: link {href}: no anchor {fragment}");
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} links checked");
    let missing = host.client.get(format!("{}/docs/no-such-page", host.origin)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    host.shutdown().await;

    let host = new_host().options(|o| o.docs = false).start().await;
    let gone = host.client.get(format!("{}/docs", host.origin)).send().await.unwrap();
    assert_eq!(gone.status(), 404);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_is_served_per_agent_with_its_assets() {
    let host = new_host().agents(&["alpha", "beta"]).start().await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let page = client.get(format!("{}/beta/playground", host.origin)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("<meta name=\"bdk-base\" content=\"/beta\">"), "{page}");
    for (file, content_type, _) in bdk_server::web::playground::ASSETS {
        assert!(page.contains("/beta/playground/assets/") || !file.ends_with(".css"));
        let asset = client.get(format!("{}/beta/playground/assets/{file}", host.origin)).send().await.unwrap();
        assert_eq!(asset.status(), 200, "{file}");
        assert_eq!(asset.headers()["content-type"].to_str().unwrap(), *content_type);
        let text = asset.text().await.unwrap();
        // Offline: nothing is loaded from another origin.
        assert!(!text.contains("https://") && !text.contains("http://"), "{file} refers to another origin");
    }
    let missing = client.get(format!("{}/beta/playground/assets/nope.js", host.origin)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    // Several agents: /playground leads to the index.
    let to = client.get(format!("{}/playground", host.origin)).send().await.unwrap();
    assert_eq!(to.status(), 303);
    assert_eq!(to.headers()["location"], "/");
    // The playgroundUrl of a session answer is served.
    let started = host.start_session("hi").await;
    let url = started.playground_url.unwrap();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200, "{url}");
    host.shutdown().await;

    let host = new_host().options(|o| o.mode = Mode::Single).start().await;
    let root = client.get(format!("{}/", host.origin)).send().await.unwrap();
    assert_eq!(root.status(), 303);
    assert_eq!(root.headers()["location"], "/playground");
    let page = client.get(format!("{}/playground", host.origin)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("<meta name=\"bdk-base\" content=\"\">"), "{page}");
    host.shutdown().await;

    let host = new_host().options(|o| o.playground = false).start().await;
    for path in ["/hello/playground", "/hello/playground/assets/app.js", "/playground"] {
        let response = client.get(format!("{}{path}", host.origin)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path} under --no-playground");
    }
    host.shutdown().await;
}
