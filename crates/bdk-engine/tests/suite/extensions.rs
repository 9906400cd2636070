//! An extension's `config` reaches its commands: a mounted extension's tool, called by the
//! model through the fake model server, sees the mount's namespace and config in
//! `BDK_EXTENSION` / `BDK_EXTENSION_CONFIG` and in `context.extension` (with `${NAME}`
//! placeholders read from the environment at call time); the root's own tools see neither; the
//! extension's hook command gets the same variables, and so do its schedule `run` command and
//! its named reminder handler (the root's own get none).

use std::sync::Arc;

use bdk_protocol::EventData;
use serde_json::{Value, json};

use super::folder::*;
use super::support::*;

const PROBE: &str = "import json, os, sys\nrequest = json.load(sys.stdin)\njson.dump({\"ns\": os.environ.get(\"BDK_EXTENSION\"), \
                     \"env\": json.loads(os.environ.get(\"BDK_EXTENSION_CONFIG\", \"null\")), \"context\": request[\"context\"].get(\"extension\")}, sys.stdout)\n";

/// Writes the extension variables it started with, then reads events until stdin closes.
const HOOK: &str = "import json, os, sys\nout = os.path.join(os.environ['BDK_STATE_ROOT'], 'hook-config.json')\n\
                    tmp = out + '.tmp'\nwith open(tmp, 'w') as f:\n    json.dump({'ns': os.environ.get('BDK_EXTENSION'), \
                    'config': json.loads(os.environ.get('BDK_EXTENSION_CONFIG', 'null'))}, f)\nos.replace(tmp, out)\n\
                    for line in sys.stdin:\n    pass\n";

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
        ("extensions/ci/hooks/audit.toml", "events = [\"*\"]\ncommand = [\"python3\", \"lib/hook.py\"]\n"),
        ("extensions/ci/lib/hook.py", HOOK),
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

    // The extension's hook command got the same config.
    let written = folder.state().join("hook-config.json");
    let seen = within(async {
        loop {
            if let Ok(text) = std::fs::read_to_string(&written)
                && let Ok(value) = serde_json::from_str::<Value>(&text)
            {
                return value;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(seen, json!({"ns": "ci", "config": config}));
}

/// Writes what it was told (namespace, config, `context.extension`) to the file its argument
/// names, in its working directory.
const TIMED_PROBE: &str = "import json, os, sys\nrequest = json.load(sys.stdin)\nseen = {\"ns\": os.environ.get(\"BDK_EXTENSION\"), \
                           \"env\": json.loads(os.environ.get(\"BDK_EXTENSION_CONFIG\", \"null\")), \"context\": request[\"context\"].get(\"extension\")}\n\
                           with open(sys.argv[1], \"w\") as f:\n    json.dump(seen, f)\nprint(\"{}\")\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extensions_config_reaches_its_schedule_and_reminder_commands() {
    use bdk_engine::clock::ManualClock;
    use bdk_engine::reminders::{CreateReminder, Reminders};
    use bdk_engine::schedules::{ScheduleOptions, Schedules, Trigger};

    let schedule = |out: &str| format!("cron = \"0 3 * * *\"\nrun = [\"python3\", \"lib/probe.py\", \"{out}\"]\n");
    let handler = |out: &str| format!("command = [\"python3\", \"lib/probe.py\", \"{out}\"]\n");
    let (ext_schedule, root_schedule) = (schedule("schedule.json"), schedule("schedule.json"));
    let (ext_handler, root_handler) = (handler("reminder.json"), handler("reminder.json"));
    let folder = Folder::new(&[
        ("extensions/ci/extension.toml", "[config]\norg = \"acme\"\npath = \"${PATH}\"\n"),
        ("extensions/ci/schedules/nightly.toml", ext_schedule.as_str()),
        ("extensions/ci/reminders/recheck.toml", ext_handler.as_str()),
        ("extensions/ci/lib/probe.py", TIMED_PROBE),
        ("schedules/nightly.toml", root_schedule.as_str()),
        ("reminders/recheck.toml", root_handler.as_str()),
        ("lib/probe.py", TIMED_PROBE),
    ])
    .await;
    let project = folder.project();
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let schedules = Schedules::new(
        folder.engine.clone(),
        folder.timed(),
        clock.clone(),
        &project.caps.schedules,
        ScheduleOptions::default(),
    );
    for id in ["ci__nightly", "nightly"] {
        within(schedules.dispatch(id, Trigger::Dev)).await.unwrap();
    }
    within(schedules.settled()).await;

    folder.model.push(text("Hi.", (1, 1)));
    let started = folder.start("hello").await;
    settled(&folder.engine, &started.session_id, 1).await;
    let reminders = Reminders::new(folder.engine.clone(), folder.timed(), clock, &project.caps.reminders);
    for name in ["ci__recheck", "recheck"] {
        let request =
            CreateReminder { delay: Some("1h".into()), handler: Some(name.into()), ..CreateReminder::default() };
        let created = within(reminders.create(&started.session_id, request)).await.unwrap();
        let row = within(reminders.dispatch(&created.id)).await.unwrap();
        assert_eq!(row.status, bdk_store::FiringStatus::Completed, "{name}: {:?}", row.error);
    }

    let bot = folder.root().join("proj/bot");
    let read = |path: std::path::PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap()
    };
    let config = json!({"org": "acme", "path": std::env::var("PATH").unwrap()});
    let told = json!({"ns": "ci", "env": config, "context": {"namespace": "ci", "config": config}});
    let untold = json!({"ns": null, "env": null, "context": null});
    for file in ["schedule.json", "reminder.json"] {
        assert_eq!(read(bot.join("extensions/ci").join(file)), told, "the extension's {file}");
        assert_eq!(read(bot.join(file)), untold, "the root's {file}");
    }
}
