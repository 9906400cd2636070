//! Artifacts from a native tool, in-process (`HostServices::artifact_tag` / `artifact_list`): a
//! tool registered through the library tags an artifact in its session, as that session's
//! owner; the session's stream records `artifact.tagged` (source `host`); the tool lists it
//! back; the engine lists and serves it to its owner and to nobody else. An artifact path
//! outside the workspace is refused like the HTTP host service refuses it.

use std::sync::Arc;

use bdk_engine::{Engine, EngineOptions, ListScope, Principal};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_project::model::Predicate;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{EventData, SessionId};
use bdk_store::ArtifactQuery;
use bdk_tools::{NativeTool, ProjectTools, ToolContext, ToolError};
use serde_json::{Value, json};

use super::support::*;

/// `{"op": "tag", "request": {...}}` or `{"op": "list"}`; host errors come back as
/// `{"error": code}`.
#[derive(Clone)]
struct Filer;

impl NativeTool for Filer {
    type Input = Value;

    fn name(&self) -> &str {
        "filer"
    }

    fn description(&self) -> &str {
        "Tags and lists artifacts."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let host = ctx.services()?;
        let answer = match input["op"].as_str().unwrap_or_default() {
            "tag" => host.artifact_tag(input["request"].clone()).await,
            _ => host.artifact_list(json!({})).await,
        };
        Ok(match answer {
            Ok(value) => json!({ "ok": value }),
            Err(error) => json!({ "error": error.code }),
        })
    }
}

/// The engine, its model and its store (kept: the PostgreSQL pass drops its schema with it).
async fn engine(dir: &std::path::Path, steps: Vec<ScriptStep>) -> (Engine, Arc<ScriptedProvider>, TestStore) {
    let tools = ProjectTools::empty(dir).without_builtins().native(Filer).build().unwrap();
    let store = TestStore::open(&dir.join("state")).await;
    let provider = Arc::new(ScriptedProvider::new(steps));
    let options = EngineOptions { artifacts: Some(store.artifacts()), ..EngineOptions::default() };
    let engine = Engine::with_options(config(), store.stores(), provider.clone(), Arc::new(tools), options);
    (engine, provider, store)
}

fn results(events: &[bdk_protocol::Event]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) => {
                assert!(!r.is_error, "{:?}", r.result);
                Some(r.result.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_tool_tags_an_artifact_its_owner_lists_and_downloads() {
    let dir = tempfile::tempdir().unwrap();
    let tag = |request: Value| json!({"op": "tag", "request": request});
    let steps = vec![
        ScriptStep::tool_call(
            "c1",
            "filer",
            tag(json!({"kind": "memo", "key": "m1", "title": "Memo", "data": {"n": 1}, "content": "hello"})),
        ),
        ScriptStep::tool_call("c2", "filer", tag(json!({"kind": "memo", "key": "m2", "path": "../../outside.txt"}))),
        ScriptStep::tool_call("c3", "filer", json!({"op": "list"})),
        say("filed"),
    ];
    let (engine, provider, _store) = engine(dir.path(), steps).await;
    let started = within(engine.start_session(start("file a memo", SessionMode::Chat))).await.unwrap();
    let id: SessionId = started.session_id;
    let events = settled(&engine, &id, 1).await;
    let results = results(&events);

    let artifact = &results[0]["ok"]["artifact"];
    assert_eq!(artifact["principal"], json!("alice"), "tagged as the session's owner: {artifact}");
    assert_eq!(artifact["sessionId"], json!(id.to_string()));
    assert_eq!(artifact["source"], json!("host"));
    let artifact_id = artifact["id"].as_str().unwrap().to_owned();
    assert_eq!(results[1], json!({"error": "invalid_artifact"}), "a path outside the workspace");
    let listed = results[2]["ok"].as_array().cloned().or_else(|| results[2]["ok"]["artifacts"].as_array().cloned());
    let listed = listed.unwrap_or_else(|| panic!("{}", results[2]));
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], json!(artifact_id));

    let tagged: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ArtifactTagged(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(tagged.len(), 1, "{:?}", types(&events));
    assert_eq!(tagged[0].artifact_id, artifact_id);

    let alice = ListScope::Owner(alice());
    let mine = within(engine.artifacts(&alice, ArtifactQuery::default())).await.unwrap();
    assert_eq!(mine.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), [artifact_id.as_str()]);
    let (record, bytes) = within(engine.artifact_content(&alice, &artifact_id)).await.unwrap().unwrap();
    assert_eq!((record.key.as_str(), bytes.as_slice()), ("m1", b"hello".as_slice()));
    let mallory = ListScope::Owner(Principal::new("mallory"));
    assert!(within(engine.artifacts(&mallory, ArtifactQuery::default())).await.unwrap().is_empty());
    assert!(within(engine.artifact_content(&mallory, &artifact_id)).await.unwrap().is_none());
    // Without `agent_tool = true` the model is not offered `tag_artifact`.
    assert!(provider.requests().iter().all(|r| r.tools.iter().all(|t| t.name != "tag_artifact")));
}
