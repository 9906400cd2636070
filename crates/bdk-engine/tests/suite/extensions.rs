//! An extension's `config` reaches its commands: a mounted extension's tool, called by the
//! model through the fake model server, sees the mount's namespace and config in
//! `BDK_EXTENSION` / `BDK_EXTENSION_CONFIG` and in `context.extension` (with `${NAME}`
//! placeholders read from the environment at call time); the root's own tools see neither.

use bdk_protocol::EventData;
use serde_json::{Value, json};

use super::folder::*;
use super::support::*;

const PROBE: &str = "import json, os, sys\nrequest = json.load(sys.stdin)\njson.dump({\"ns\": os.environ.get(\"BDK_EXTENSION\"), \
                     \"env\": json.loads(os.environ.get(\"BDK_EXTENSION_CONFIG\", \"null\")), \"context\": request[\"context\"].get(\"extension\")}, sys.stdout)\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extensions_config_reaches_its_command() {
    let tool = "description = \"Reports what it was told.\"\ncommand = [\"python3\", \"lib/probe.py\"]\n";
    let folder = Folder::new(&[
        (
            "extensions/ci/extension.toml",
            "description = \"CI.\"\n[config]\norg = \"acme\"\npath = \"${PATH}\"\nretries = 3\n",
        ),
        ("extensions/ci/tools/whoami.toml", tool),
        ("extensions/ci/lib/probe.py", PROBE),
        ("tools/plain.toml", tool),
        ("lib/probe.py", PROBE),
    ])
    .await;
    folder.model.push(calls(&[("c1", "ci__whoami", "{}"), ("c2", "plain", "{}")], (1, 1)));
    folder.model.push(text("Done.", (1, 1)));
    let started = folder.start("who are you?").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    let results: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) => Some((r.tool_name.clone(), r.result.clone())),
            _ => None,
        })
        .collect();
    let of = |name: &str| results.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{results:?}")).1.clone();
    let config = json!({"org": "acme", "path": std::env::var("PATH").unwrap(), "retries": 3});
    let ext = of("ci__whoami");
    assert_eq!(ext["ns"], json!("ci"), "{ext}");
    assert_eq!(ext["env"], config);
    assert_eq!(ext["context"], json!({"namespace": "ci", "config": config}));
    let plain = of("plain");
    assert_eq!(plain, json!({"ns": null, "env": null, "context": null}));
}
