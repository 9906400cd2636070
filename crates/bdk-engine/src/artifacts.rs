//! Artifacts at run time (`artifacts.toml`, the reference's `ctx.artifacts`): checking a tag
//! request (declared kinds, the kind's schema, content paths confined to the session
//! workspace), storing it through the [`ArtifactStore`](bdk_store::ArtifactStore), and the
//! `artifact.tagged` event. Three callers reach [`tag`]: the built-in [`TOOL`] the model calls
//! (`dispatch.rs`), and host code through the host services (`host.rs`: commands over HTTP,
//! native tools in-process).
//!
//! It owns neither the storage (`bdk-store`) nor the HTTP routes (`bdk-server`).

use std::path::{Component, Path};
use std::sync::Arc;

use bdk_protocol::event::ArtifactTagged;
use bdk_protocol::{EventData, SessionId};
use bdk_store::artifacts::MAX_CONTENT_BYTES;
use bdk_store::{ArtifactQuery, ArtifactRecord, ArtifactStore, ArtifactTag, ContentInfo, Tagged};
use bdk_tools::ToolSpec;
use bdk_tools::validate::InputSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::capabilities::ArtifactsSpec;
use crate::engine::Core;
use crate::types::ListScope;

/// The built-in tagging tool (offered when `artifacts.toml` sets `agent_tool = true`).
pub const TOOL: &str = "tag_artifact";
/// The kind of an artifact tagged without one when no kinds are declared.
pub const DEFAULT_KIND: &str = "artifact";
/// `source` of an artifact the model tagged.
pub const SOURCE_TOOL: &str = "tag_artifact";
/// `source` of an artifact host code tagged.
pub const SOURCE_HOST: &str = "host";

/// A tag request as the tool and the host services take it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TagRequest {
    #[serde(default)]
    pub kind: Option<String>,
    pub key: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub data: Option<Value>,
    /// A file in the session workspace whose bytes become the downloadable content.
    #[serde(default)]
    pub path: Option<String>,
    /// Inline text content (instead of `path`).
    #[serde(default)]
    pub content: Option<String>,
    /// The download's content type (default: from the file's extension).
    #[serde(default)]
    pub content_type: Option<String>,
}

/// Who tags, and where its files are.
#[derive(Debug, Clone)]
pub(crate) struct Tagger<'a> {
    pub store: Option<&'a Arc<dyn ArtifactStore>>,
    pub spec: &'a ArtifactsSpec,
    pub principal: String,
    pub session: Option<SessionId>,
    pub workspace: Option<&'a Path>,
    pub source: &'static str,
}

/// Checks and stores one tag. `Err` is a message for the caller (the model or host code).
pub(crate) async fn tag(tagger: Tagger<'_>, request: TagRequest) -> Result<Tagged, String> {
    let Some(store) = tagger.store else {
        return Err("this host keeps no artifacts".into());
    };
    let key = request.key.trim().to_owned();
    if key.is_empty() || key.len() > 512 {
        return Err("`key` must be 1 to 512 characters".into());
    }
    let kind = resolve_kind(tagger.spec, request.kind.as_deref())?;
    if let Some(schema) = tagger.spec.kinds.iter().find(|k| k.name == kind).and_then(|k| k.schema.as_ref()) {
        let compiled =
            InputSchema::compile(schema).map_err(|e| format!("kind `{kind}` has an unusable schema: {e}"))?;
        let data = request.data.clone().unwrap_or(Value::Null);
        if let Err(errors) = compiled.check(&data) {
            return Err(format!("the data does not match kind `{kind}`'s schema:\n{}", errors.join("\n")));
        }
    }
    let content = match (&request.path, &request.content) {
        (Some(_), Some(_)) => return Err("give `path` or `content`, not both".into()),
        (Some(path), None) => Some(read_workspace_file(tagger.workspace, path, request.content_type.as_deref()).await?),
        (None, Some(text)) => {
            if text.len() > MAX_CONTENT_BYTES {
                return Err(format!("`content` is over {MAX_CONTENT_BYTES} bytes"));
            }
            let info = ContentInfo {
                file_name: format!("{}.txt", file_stem(&key)),
                content_type: request.content_type.clone().unwrap_or_else(|| "text/plain; charset=utf-8".into()),
                size: text.len() as u64,
            };
            Some((info, text.clone().into_bytes()))
        }
        (None, None) => None,
    };
    let tag = ArtifactTag {
        kind,
        key,
        title: request.title.filter(|t| !t.trim().is_empty()),
        data: request.data,
        principal: tagger.principal,
        session_id: tagger.session,
        source: tagger.source.to_owned(),
        content,
    };
    let tagged = store.tag(tag, Some(tagger.spec.max.max(1))).await.map_err(|error| {
        tracing::error!(%error, "storing an artifact failed");
        "storing the artifact failed; see the server log".to_owned()
    })?;
    if !tagged.evicted.is_empty() {
        tracing::info!(evicted = tagged.evicted.len(), max = tagger.spec.max, "artifact retention evicted the oldest");
    }
    Ok(tagged)
}

/// Listing for [`Engine::artifacts`](crate::Engine::artifacts).
pub(crate) async fn list(
    core: &Core,
    scope: &ListScope,
    mut query: ArtifactQuery,
) -> crate::error::Result<Vec<ArtifactRecord>> {
    let Some(store) = &core.artifact_store else { return Ok(Vec::new()) };
    if let ListScope::Owner(principal) = scope {
        query.principal = Some(principal.as_str().to_owned());
    }
    Ok(store.list(&query).await?)
}

/// Download for [`Engine::artifact_content`](crate::Engine::artifact_content): another
/// principal's artifact is as absent as an unknown one.
pub(crate) async fn content(
    core: &Core,
    scope: &ListScope,
    id: &str,
) -> crate::error::Result<Option<(ArtifactRecord, Vec<u8>)>> {
    let Some(store) = &core.artifact_store else { return Ok(None) };
    let Some(record) = store.get(id).await? else { return Ok(None) };
    if let ListScope::Owner(principal) = scope
        && principal.as_str() != record.principal
    {
        return Ok(None);
    }
    Ok(store.content(id).await?.map(|bytes| (record, bytes)))
}

/// The `artifact.tagged` event of a stored record.
pub(crate) fn tagged_event(record: &ArtifactRecord) -> EventData {
    EventData::ArtifactTagged(ArtifactTagged {
        artifact_id: record.id.clone(),
        kind: record.kind.clone(),
        key: record.key.clone(),
        title: record.title.clone(),
        source: Some(record.source.clone()),
    })
}

/// What the model reads after a successful tag.
pub(crate) fn tool_result(tagged: &Tagged) -> Value {
    json!({
        "artifactId": tagged.record.id,
        "kind": tagged.record.kind,
        "key": tagged.record.key,
        "created": tagged.created,
        "hasContent": tagged.record.content.is_some(),
    })
}

fn resolve_kind(spec: &ArtifactsSpec, kind: Option<&str>) -> Result<String, String> {
    if spec.kinds.is_empty() {
        let kind = kind.map(str::trim).filter(|k| !k.is_empty()).unwrap_or(DEFAULT_KIND);
        return Ok(kind.to_owned());
    }
    let names = || spec.kinds.iter().map(|k| format!("`{}`", k.name)).collect::<Vec<_>>().join(", ");
    match kind {
        None => Err(format!("`kind` is required: one of {}", names())),
        Some(kind) if spec.kinds.iter().any(|k| k.name == kind) => Ok(kind.to_owned()),
        Some(kind) => Err(format!("`{kind}` is not a declared artifact kind; the kinds are {}", names())),
    }
}

/// Reads `path` (relative, inside `workspace`, no symlink out of it) as content.
async fn read_workspace_file(
    workspace: Option<&Path>,
    path: &str,
    content_type: Option<&str>,
) -> Result<(ContentInfo, Vec<u8>), String> {
    let Some(workspace) = workspace else {
        return Err("this call has no workspace to read `path` from".into());
    };
    let relative = Path::new(path);
    let plain = relative.components().next().is_some()
        && relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain {
        return Err(format!("`path` {path:?} must be relative and stay inside the workspace"));
    }
    let (workspace, joined, shown) = (workspace.to_path_buf(), workspace.join(relative), path.to_owned());
    let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
        let root = workspace.canonicalize().map_err(|e| format!("the workspace cannot be read: {e}"))?;
        let real = joined.canonicalize().map_err(|_| format!("there is no file {shown:?} in the workspace"))?;
        if !real.starts_with(&root) {
            return Err("`path` leads outside the workspace".into());
        }
        let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("`path` is not a file".into());
        }
        if meta.len() > MAX_CONTENT_BYTES as u64 {
            return Err(format!("the file is over {MAX_CONTENT_BYTES} bytes"));
        }
        std::fs::read(&real).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())??;
    let file_name = relative.file_name().and_then(|n| n.to_str()).unwrap_or("content").to_owned();
    let content_type = content_type.map(str::to_owned).unwrap_or_else(|| guess_type(&file_name).to_owned());
    Ok((ContentInfo { file_name, content_type, size: bytes.len() as u64 }, bytes))
}

/// A content type from a file name's extension.
pub(crate) fn guess_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown; charset=utf-8",
        "txt" | "log" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "ndjson" => "application/x-ndjson",
        "html" | "htm" => "text/html; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

fn file_stem(key: &str) -> String {
    let stem: String =
        key.chars().take(64).map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    if stem.is_empty() { "artifact".into() } else { stem }
}

/// The tool's spec: the declared kinds with their descriptions.
pub(crate) fn spec(spec: &ArtifactsSpec) -> ToolSpec {
    let mut description = String::from(
        "Tag a durable artifact (a report, a decision, a reviewed change) so people can find and \
         download it later. Tagging the same kind and key again updates it. Attach content with \
         `path` (a file in your workspace) or `content` (text). Kinds:\n",
    );
    for kind in &spec.kinds {
        description.push_str(&format!("- `{}`: {}\n", kind.name, kind.description.trim()));
    }
    let kinds: Vec<&str> = spec.kinds.iter().map(|k| k.name.as_str()).collect();
    ToolSpec {
        name: TOOL.into(),
        description,
        input_schema: json!({
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": kinds},
                "key": {"type": "string", "description": "Identifies the artifact within its kind."},
                "title": {"type": "string"},
                "data": {"description": "Structured data (checked against the kind's schema)."},
                "path": {"type": "string", "description": "A workspace file to attach."},
                "content": {"type": "string", "description": "Text to attach instead of a file."},
                "contentType": {"type": "string"}
            },
            "required": ["kind", "key"],
            "additionalProperties": false,
        }),
        output_schema: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::ArtifactKindSpec;

    fn declared() -> ArtifactsSpec {
        ArtifactsSpec {
            agent_tool: true,
            max: 10,
            kinds: vec![ArtifactKindSpec {
                name: "report".into(),
                description: "A report.".into(),
                schema: Some(json!({"type": "object", "required": ["week"]})),
            }],
        }
    }

    #[test]
    fn kinds_are_free_form_without_a_registry_and_checked_with_one() {
        let free = ArtifactsSpec::default();
        assert_eq!(resolve_kind(&free, None).unwrap(), DEFAULT_KIND);
        assert_eq!(resolve_kind(&free, Some("note")).unwrap(), "note");
        let spec = declared();
        assert!(resolve_kind(&spec, Some("note")).unwrap_err().contains("`report`"));
        assert!(resolve_kind(&spec, None).is_err());
    }

    #[tokio::test]
    async fn paths_stay_inside_the_workspace() {
        let temp = tempfile::tempdir().unwrap();
        let workspace = temp.path().join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(temp.path().join("secret.txt"), "no").unwrap();
        std::fs::write(workspace.join("r.md"), "# hi").unwrap();
        let (info, bytes) = read_workspace_file(Some(&workspace), "r.md", None).await.unwrap();
        assert_eq!((info.file_name.as_str(), bytes.as_slice()), ("r.md", b"# hi".as_slice()));
        assert!(info.content_type.starts_with("text/markdown"));
        for bad in ["../secret.txt", "/etc/passwd", "", "missing.txt"] {
            assert!(read_workspace_file(Some(&workspace), bad, None).await.is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(temp.path().join("secret.txt"), workspace.join("link")).unwrap();
            let err = read_workspace_file(Some(&workspace), "link", None).await.unwrap_err();
            assert!(err.contains("outside"), "{err}");
        }
    }
}
