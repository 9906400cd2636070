//! `/docs`: the project's own documentation (README, CONTRIBUTING and `docs/**`, embedded at
//! build time by `build.rs`) rendered to HTML with pulldown-cmark. A page's URL is its
//! repository path without `.md` (`docs/http.md` → `/docs/http`, `README.md` → `/docs`), and a
//! folder (`docs/decisions/`) gets an index page. Relative links between pages are rewritten to
//! those URLs (fragments kept, headings carry GitHub-style ids); links to repository files the
//! site does not hold become plain text, so every link on the site works.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

use super::escape;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/docs_pages.rs"));
}

/// The docs routes (host level).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new().route("/docs", get(index)).route("/docs/{*path}", get(page))
}

async fn index() -> Response {
    render("").map_or_else(not_found, |html| Html(html).into_response())
}

async fn page(Path(path): Path<String>) -> Response {
    let path = path.trim_end_matches('/');
    render(path).map_or_else(not_found, |html| Html(html).into_response())
}

fn not_found() -> Response {
    let body = layout("Not found", "<h1>Not found</h1><p>No such page. <a href=\"/docs\">Back to the docs</a>.</p>");
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// The URL path (under `/docs/`) of a repository markdown file.
pub fn page_id(repo_path: &str) -> String {
    let stem = repo_path.strip_suffix(".md").unwrap_or(repo_path);
    let stem = stem.strip_prefix("docs/").unwrap_or(stem);
    if stem == "README" { String::new() } else { stem.to_owned() }
}

/// `/docs` or `/docs/<id>`.
pub fn page_url(id: &str) -> String {
    if id.is_empty() { "/docs".to_owned() } else { format!("/docs/{id}") }
}

struct Site {
    /// page id → (repository path, markdown).
    pages: HashMap<String, (&'static str, &'static str)>,
    /// folder page id → the page ids in it.
    folders: HashMap<String, Vec<String>>,
}

fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let mut pages = HashMap::new();
        let mut folders: HashMap<String, Vec<String>> = HashMap::new();
        for (path, text) in embedded::PAGES {
            let id = page_id(path);
            if let Some((folder, _)) = id.rsplit_once('/') {
                folders.entry(folder.to_owned()).or_default().push(id.clone());
            }
            pages.insert(id, (*path, *text));
        }
        for list in folders.values_mut() {
            list.sort();
        }
        Site { pages, folders }
    })
}

/// Every page and folder URL the site serves.
pub fn urls() -> Vec<String> {
    let site = site();
    let mut urls: Vec<String> = site.pages.keys().chain(site.folders.keys()).map(|id| page_url(id)).collect();
    urls.sort();
    urls
}

/// The HTML of the page or folder `id`, if the site has it.
pub fn render(id: &str) -> Option<String> {
    let site = site();
    if let Some((path, text)) = site.pages.get(id) {
        let title = first_heading(text).unwrap_or_else(|| (*path).to_owned());
        return Some(layout(&title, &markdown_to_html(path, text)));
    }
    let list = site.folders.get(id)?;
    let mut body = format!("<h1>{}</h1>\n<ul>\n", escape(&format!("docs/{id}/")));
    for page in list {
        let (path, text) = site.pages.get(page)?;
        let title = first_heading(text).unwrap_or_else(|| (*path).to_owned());
        let _ = writeln!(body, "<li><a href=\"{}\">{}</a></li>", escape(&page_url(page)), escape(&title));
    }
    body.push_str("</ul>\n");
    Some(layout(id, &body))
}

fn first_heading(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("# ")).map(|t| t.trim().replace('`', ""))
}

/// Resolves `target` (a link in the page at `from`, a repository path) to a site URL: `Some`
/// for pages and folders of the site (fragment kept), `None` for repository files it lacks.
/// Absolute URLs and bare fragments come back unchanged.
pub fn resolve_link(from: &str, target: &str) -> Option<String> {
    if target.starts_with('#') || target.contains("://") || target.starts_with("mailto:") {
        return Some(target.to_owned());
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let base = from.rsplit_once('/').map_or("", |(dir, _)| dir);
    let mut parts: Vec<&str> =
        if path.starts_with('/') { Vec::new() } else { base.split('/').filter(|p| !p.is_empty()).collect() };
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    let site = site();
    let id = if joined.ends_with(".md") {
        let id = page_id(&joined);
        site.pages.contains_key(&id).then_some(id)?
    } else {
        let id = joined.strip_prefix("docs/").unwrap_or(if joined == "docs" { "" } else { &joined }).to_owned();
        (site.folders.contains_key(&id) || (id.is_empty() && joined == "docs")).then_some(id)?
    };
    let mut url = page_url(&id);
    if let Some(fragment) = fragment {
        url.push('#');
        url.push_str(fragment);
    }
    Some(url)
}

/// GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens.
pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Renders one markdown file (repository path `from`) with links rewritten and heading ids.
pub fn markdown_to_html(from: &str, text: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_HEADING_ATTRIBUTES;
    let events: Vec<Event> = Parser::new_ext(text, options).collect();
    let mut out: Vec<Event> = Vec::with_capacity(events.len());
    let mut seen: HashMap<String, usize> = HashMap::new();
    // Links whose target the site lacks: their End is dropped too.
    let mut dropped_links = Vec::new();
    let mut i = 0;
    while i < events.len() {
        match &events[i] {
            Event::Start(Tag::Heading { level, id: None, classes, attrs }) => {
                let mut text = String::new();
                let mut j = i + 1;
                while j < events.len() && !matches!(events[j], Event::End(TagEnd::Heading(_))) {
                    if let Event::Text(t) | Event::Code(t) = &events[j] {
                        text.push_str(t);
                    }
                    j += 1;
                }
                let base = slug(&text);
                let count = seen.entry(base.clone()).or_insert(0);
                let id = if *count == 0 { base } else { format!("{base}-{count}") };
                *count += 1;
                out.push(Event::Start(Tag::Heading {
                    level: *level,
                    id: Some(CowStr::from(id)),
                    classes: classes.clone(),
                    attrs: attrs.clone(),
                }));
            }
            Event::Start(Tag::Link { link_type, dest_url, title, id }) => match resolve_link(from, dest_url) {
                Some(url) => {
                    dropped_links.push(false);
                    out.push(Event::Start(Tag::Link {
                        link_type: *link_type,
                        dest_url: CowStr::from(url),
                        title: title.clone(),
                        id: id.clone(),
                    }));
                }
                None => {
                    dropped_links.push(true);
                    out.push(Event::InlineHtml(CowStr::from(format!(
                        "<span class=\"repo-file\" title=\"{}\">",
                        escape(&format!("repository file: {dest_url}"))
                    ))));
                }
            },
            Event::End(TagEnd::Link) => {
                if dropped_links.pop().unwrap_or(false) {
                    out.push(Event::InlineHtml(CowStr::from("</span>")));
                } else {
                    out.push(Event::End(TagEnd::Link));
                }
            }
            // Raw HTML in the docs is shown, not run.
            Event::Html(html) | Event::InlineHtml(html) => out.push(Event::Text(html.clone())),
            other => out.push(other.clone()),
        }
        i += 1;
    }
    let mut html = String::with_capacity(text.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, out.into_iter());
    html
}

fn layout(title: &str, body: &str) -> String {
    let mut nav = String::new();
    let site = site();
    let mut top: Vec<&String> = site.pages.keys().filter(|id| !id.contains('/')).collect();
    top.sort();
    for id in top {
        let label = if id.is_empty() { "README" } else { id.as_str() };
        let _ = write!(nav, "<li><a href=\"{}\">{}</a></li>", escape(&page_url(id)), escape(label));
    }
    let mut folders: Vec<&String> = site.folders.keys().collect();
    folders.sort();
    for id in folders {
        let _ = write!(nav, "<li><a href=\"{}\">{}/</a></li>", escape(&page_url(id)), escape(id));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\"><title>{} · BDK docs</title><style>{}</style></head>\n<body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <nav aria-label=\"Documentation\"><strong>BDK docs</strong><ul>{nav}</ul></nav>\
         <main id=\"main\">{body}</main></body></html>\n",
        escape(title),
        STYLE
    )
}

const STYLE: &str = "body{font:16px/1.55 system-ui,sans-serif;margin:0;display:flex;gap:2rem;color:#1b1b1f;background:#fff}\
nav{padding:1rem 1.2rem;border-right:1px solid #ddd;min-width:12rem}nav ul{list-style:none;padding:0}nav li{margin:.3rem 0}\
main{max-width:52rem;padding:1rem 1.5rem 4rem;min-width:0;flex:1}pre{background:#f5f5f7;padding:.8rem;overflow:auto;border-radius:6px}\
code{background:#f0f0f3;padding:0 .2rem;border-radius:3px}pre code{background:none;padding:0}table{border-collapse:collapse;display:block;overflow:auto}\
td,th{border:1px solid #ccc;padding:.3rem .5rem;vertical-align:top}a{color:#0b57d0}.repo-file{border-bottom:1px dotted #888}\
.skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:1rem;background:#fff;padding:.3rem}\
@media (max-width:720px){body{display:block}nav{border-right:none;border-bottom:1px solid #ddd}}\
@media (prefers-color-scheme:dark){body{background:#15161a;color:#e6e6e9}pre,code{background:#24252b}a{color:#8ab4f8}nav{border-color:#333}}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ids_drop_the_docs_folder_and_extension() {
        assert_eq!(page_id("README.md"), "");
        assert_eq!(page_id("docs/http.md"), "http");
        assert_eq!(page_id("docs/decisions/0002-diagnostics.md"), "decisions/0002-diagnostics");
        assert_eq!(page_id("CONTRIBUTING.md"), "CONTRIBUTING");
    }

    #[test]
    fn links_resolve_relative_to_the_page() {
        assert_eq!(resolve_link("README.md", "docs/http.md#limits").as_deref(), Some("/docs/http#limits"));
        assert_eq!(resolve_link("docs/cli.md", "formats.md").as_deref(), Some("/docs/formats"));
        assert_eq!(
            resolve_link("docs/formats.md", "decisions/0003-schema-predicates.md").as_deref(),
            Some("/docs/decisions/0003-schema-predicates")
        );
        assert_eq!(resolve_link("README.md", "docs/decisions/").as_deref(), Some("/docs/decisions"));
        assert_eq!(resolve_link("docs/cli.md", "../crates/bdk/examples/custom_bdk.rs"), None);
        assert_eq!(resolve_link("docs/cli.md", "#exit-codes").as_deref(), Some("#exit-codes"));
        assert_eq!(resolve_link("docs/cli.md", "https://docs.rs/x").as_deref(), Some("https://docs.rs/x"));
        assert_eq!(resolve_link("docs/cli.md", "../../../etc/passwd"), None);
    }

    #[test]
    fn headings_get_github_anchors_and_unknown_files_lose_their_link() {
        let html = markdown_to_html(
            "docs/cli.md",
            "# Exit codes\n\n## `bdk call`\n\n## Exit codes\n\nSee [x](../crates/a.rs) and [h](http.md#limits). <script>alert(1)</script>\n",
        );
        assert!(html.contains("<h1 id=\"exit-codes\">"), "{html}");
        assert!(html.contains("<h2 id=\"bdk-call\">"), "{html}");
        assert!(html.contains("<h2 id=\"exit-codes-1\">"), "{html}");
        assert!(html.contains("<span class=\"repo-file\""), "{html}");
        assert!(html.contains("href=\"/docs/http#limits\""), "{html}");
        assert!(!html.contains("<script>"), "{html}");
    }
}
