//! Artifacts end to end on a real socket: the model, through the fake model server, tags one
//! with `tag_artifact` (content from a workspace file), `artifact.tagged` is on the stream, `GET /v1/artifacts` lists it for its
//! owner only, `GET /v1/artifacts/:id/content` downloads it as an attachment and is 404 for
//! another principal and for unknown ids; undeclared kinds, schema mismatches and paths outside
//! the workspace are tool errors the model reads; host code tags through the host service.

use std::sync::Arc;

use bdk_model::{ModelInput, ModelLayer, ModelProvider, ProviderOptions, ScriptStep};
use bdk_server::{AuthPolicy, BearerToken};
use bdk_test_support::{FakeServer, Part, Reply, openai_sse as oa};
use serde_json::{Value, json};

use super::support::{Host, host};

const ARTIFACTS_TOML: &str = r#"agent_tool = true
max = 3

[kinds.report]
description = "A weekly report."
schema = { type = "object", required = ["week"], properties = { week = { type = "integer" } } }
"#;

const TAG_PY: &str = r#"import json, os, sys, urllib.request
request = json.load(sys.stdin)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
body = json.dumps(request["input"]).encode()
req = urllib.request.Request(os.environ["BDK_HOST_URL"] + "/artifacts/tag", data=body, headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["BDK_HOST_TOKEN"]})
with opener.open(req, timeout=20) as resp:
    json.dump(json.loads(resp.read()), sys.stdout)
"#;

const TAG_TOML: &str = r#"description = "Tags an artifact from host code."
effect = "read"
command = ["python3", "lib/tag.py"]
"#;

fn builder() -> super::support::Builder {
    let tokens = vec![BearerToken::named("alice", "a-secret"), BearerToken::named("bob", "b-secret")];
    host()
        .file("bot/artifacts.toml", ARTIFACTS_TOML)
        .file("bot/sandbox/workspace/out/week1.md", "# Week 1\nAll good.\n")
        .file("bot/tools/host_tag.toml", TAG_TOML)
        .file("bot/lib/tag.py", TAG_PY)
        .options(|o| o.auth = AuthPolicy::from_flags(tokens, false))
        .token("a-secret")
}

async fn start(steps: Vec<ScriptStep>) -> Host {
    builder().script(steps).start().await
}

/// An `openai-compatible` provider on a fake model server.
async fn fake_model() -> (FakeServer, Arc<dyn ModelProvider>) {
    let server = FakeServer::start().await;
    let agent = ModelLayer {
        model: Some("fake-model".into()),
        provider: Some("openai-compatible".into()),
        base_url: Some(server.url()),
        ..ModelLayer::default()
    };
    let resolved = bdk_model::resolve(&ModelInput { cli: ModelLayer::default(), agent }, &|_| None);
    let provider = bdk_model::build(&resolved, &ProviderOptions::default());
    (server, provider)
}

/// A streamed Chat Completions reply that calls `tag_artifact` once per input.
fn tag_calls(inputs: &[(&str, Value)]) -> Reply {
    let mut parts: Vec<Part> = vec![oa::role()];
    for (index, (id, input)) in inputs.iter().enumerate() {
        parts.push(oa::tool_call(index as u64, Some(id), Some("tag_artifact"), &input.to_string()));
    }
    parts.extend([oa::finish("tool_calls"), oa::usage(10, 5, 0, 0), oa::done()]);
    Reply::sse(parts)
}

fn results(events: &[bdk_protocol::Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["type"] == json!("action.result"))
        .map(|e| e["data"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tagged_artifact_is_listed_and_downloaded_by_its_owner_only() {
    let good =
        json!({"kind": "report", "key": "week-1", "title": "Week 1", "data": {"week": 1}, "path": "out/week1.md"});
    let (model, provider) = fake_model().await;
    model.push(tag_calls(&[
        ("t1", good),
        ("t2", json!({"kind": "memo", "key": "x"})),
        ("t3", json!({"kind": "report", "key": "w2", "data": {"week": "two"}})),
        ("t4", json!({"kind": "report", "key": "w3", "data": {"week": 3}, "path": "../../../../etc/passwd"})),
    ]));
    model.push(Reply::sse(oa::text_reply("tagged", 20, 5)));
    let host = builder().model(provider).start().await;
    let id = host.start_session("tag the report").await.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    let events = host.events(&id).await;
    let tagged: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["type"] == json!("artifact.tagged"))
        .collect();
    assert_eq!(tagged.len(), 1, "{tagged:?}");
    let artifact_id = tagged[0]["data"]["artifactId"].as_str().unwrap().to_owned();
    assert_eq!(tagged[0]["data"]["source"], json!("tag_artifact"));
    // Results land in finishing order; find each by what it says.
    let results = results(&events);
    let ok: Vec<&Value> = results.iter().filter(|r| r["isError"] == json!(false)).collect();
    assert_eq!(ok.len(), 1, "{results:?}");
    assert_eq!(ok[0]["result"]["artifactId"], json!(artifact_id));
    let errors: Vec<&str> = results.iter().filter_map(|r| r["result"].as_str()).collect();
    for expected in ["not a declared artifact kind", "does not match kind `report`'s schema", "inside the workspace"] {
        assert!(errors.iter().any(|e| e.contains(expected)), "{expected}: {errors:?}");
    }

    let listed = host.get("/v1/artifacts").await;
    assert_eq!(listed.status.as_u16(), 200, "{}", listed.text);
    let artifacts = listed.body["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(artifacts[0]["id"], json!(artifact_id));
    assert_eq!(artifacts[0]["principal"], json!("alice"));
    assert_eq!(artifacts[0]["sessionId"], json!(id));
    assert_eq!(artifacts[0]["data"], json!({"week": 1}));
    let by_kind = host.get("/v1/artifacts?kind=memo").await;
    assert_eq!(by_kind.body["artifacts"], json!([]));
    let by_session = host.get(&format!("/v1/artifacts?sessionId={id}&limit=1")).await;
    assert_eq!(by_session.body["artifacts"].as_array().unwrap().len(), 1);
    host.get("/v1/artifacts?limit=0").await.assert_error(400, "invalid_request");

    let download = host.get(&format!("/v1/artifacts/{artifact_id}/content")).await;
    assert_eq!(download.status.as_u16(), 200);
    assert_eq!(download.text, "# Week 1\nAll good.\n");
    assert!(download.headers["content-type"].to_str().unwrap().starts_with("text/markdown"));
    assert_eq!(download.headers["content-disposition"], "attachment; filename=\"week1.md\"");

    let bob = host.as_token(Some("b-secret"));
    bob.get(&format!("/v1/artifacts/{artifact_id}/content")).await.assert_error(404, "artifact_not_found");
    assert_eq!(bob.get("/v1/artifacts").await.body["artifacts"], json!([]));
    host.get("/v1/artifacts/art_unknown/content").await.assert_error(404, "artifact_not_found");
    host.as_token(None).get("/v1/artifacts").await.assert_error(401, "unauthorized");
    // The model read the refusals as tool results.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let tool_results = requests[1].body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(tool_results, 4);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_code_tags_and_the_cap_evicts_the_oldest() {
    let mut steps = Vec::new();
    for week in 1..=4 {
        let input = json!({"kind": "report", "key": format!("w{week}"), "data": {"week": week}, "content": format!("week {week}")});
        steps.push(ScriptStep::tool_call(format!("h{week}"), "host_tag", input));
    }
    steps.push(ScriptStep::text("done"));
    let host = start(steps).await;
    let id = host.start_session("tag four").await.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    let events = host.events(&id).await;
    let results = results(&events);
    assert!(results.iter().all(|r| r["isError"] == json!(false)), "{results:?}");
    assert_eq!(results[0]["result"]["artifact"]["source"], json!("host"));
    let tagged = events.iter().filter(|e| e.data.event_type() == "artifact.tagged").count();
    assert_eq!(tagged, 4);
    // max = 3: the first one is gone, newest first.
    let listed = host.get("/v1/artifacts").await;
    let keys: Vec<&str> =
        listed.body["artifacts"].as_array().unwrap().iter().map(|a| a["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["w4", "w3", "w2"]);
    let first = results[0]["result"]["artifact"]["id"].as_str().unwrap();
    host.get(&format!("/v1/artifacts/{first}/content")).await.assert_error(404, "artifact_not_found");
    let last = results[3]["result"]["artifact"]["id"].as_str().unwrap();
    let download = host.get(&format!("/v1/artifacts/{last}/content")).await;
    assert_eq!(download.text, "week 4");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_session_tags_nothing() {
    let input = json!({"kind": "report", "key": "w1", "data": {"week": 1}, "content": "x"});
    let host = start(vec![ScriptStep::tool_call("t1", "tag_artifact", input), ScriptStep::text("ok")]).await;
    let started = host.post("/v1/session", &json!({"message": "tag", "dryRun": true})).await;
    assert_eq!(started.status.as_u16(), 200, "{}", started.text);
    let id = started.body["sessionId"].as_str().unwrap().to_owned();
    host.wait_for(&id, "session.waiting", None).await;
    let events = host.events(&id).await;
    let results = results(&events);
    assert_eq!(results[0]["stubbed"], json!(true), "{results:?}");
    assert!(events.iter().all(|e| e.data.event_type() != "artifact.tagged"));
    assert_eq!(host.get("/v1/artifacts").await.body["artifacts"], json!([]));
    host.shutdown().await;
}
