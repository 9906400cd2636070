//! `schedules/<id>.md` and `schedules/<id>.toml`: 5-field UTC cron, exactly one action, receive
//! channels that exist, and one id per schedule.

use bdk_project::model::ScheduleAction;

use super::fixture::Fixture;
use super::{assert_clean, find, only};

#[test]
fn markdown_and_toml_schedules_load() {
    //! Guards: the Markdown body is the prompt; TOML gives prompt, run or receive.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/daily.md", "---\ncron: \"0 9 * * 1-5\"\ndescription: Standup.\n---\nSummarize.\n")
        .file("bot/schedules/sweep.toml", "cron = \"*/15 * * * *\"\nrun = [\"python3\", \"lib/sweep.py\"]\n")
        .file("bot/lib/sweep.py", "")
        .file(
            "bot/schedules/nudge.toml",
            "cron = \"0 0 * * *\"\nreceive = { channel = \"intake\", message = \"tick\" }\n",
        )
        .file("bot/channels/intake.toml", "[[routes]]\nmethod = \"POST\"\npath = \"/x\"\nhandler = [\"t\"]\n")
        .load();
    // `receive` loads with no diagnostic: channels run.
    assert_eq!(project.diagnostics.len(), 0, "{:?}", project.diagnostics);
    let by_id = |id: &str| project.caps.schedules.iter().find(|s| s.id == id).expect(id);
    assert_eq!(by_id("daily").action, ScheduleAction::Prompt("Summarize.".into()));
    assert_eq!(by_id("daily").description.as_deref(), Some("Standup."));
    assert_eq!(by_id("sweep").action, ScheduleAction::Run(vec!["python3".into(), "lib/sweep.py".into()]));
    assert_eq!(by_id("nudge").action, ScheduleAction::Receive { channel: "intake".into(), message: "tick".into() });
    assert_eq!(by_id("sweep").timeout, std::time::Duration::from_secs(300));
}

#[test]
fn a_run_schedule_takes_a_timeout() {
    //! Guards: `timeout` bounds a `run` command; a bad value is invalid_value.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.toml", "cron = \"0 9 * * *\"\nrun = [\"true\"]\ntimeout = \"45s\"\n")
        .load();
    assert_clean(&project);
    assert_eq!(project.caps.schedules[0].timeout, std::time::Duration::from_secs(45));
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.toml", "cron = \"0 9 * * *\"\nrun = [\"true\"]\ntimeout = \"soon\"\n")
        .load();
    only(&project, "invalid_value").error().file("bot/schedules/a.toml");
}

#[test]
fn invalid_cron_is_reported_at_its_line() {
    //! Guards: an out-of-range cron field is invalid_cron on the cron line.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.md", "---\ncron: \"0 25 * * *\"\n---\nGo.\n")
        .file("bot/schedules/b.toml", "prompt = \"Go.\"\ncron = \"every day\"\n")
        .load();
    let found: Vec<_> = super::all_with(&project, "invalid_cron")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.line))
        .collect();
    assert_eq!(found, [("bot/schedules/a.md".to_owned(), Some(2)), ("bot/schedules/b.toml".to_owned(), Some(2))]);
    let messages: Vec<_> = super::all_with(&project, "invalid_cron").iter().map(|d| d.message.clone()).collect();
    assert_eq!(
        messages,
        [
            "invalid cron expression: hour: 25 is out of range (0-23)",
            "invalid cron expression: `every day` has 2 fields; schedules use 5 (minute hour day month weekday)",
        ]
    );
    find(&project, "invalid_cron").error();
    assert!(project.caps.schedules.is_empty());
}

#[test]
fn six_field_cron_is_refused() {
    //! Guards: schedules use 5 fields; a seconds field is refused, not silently reinterpreted.
    let (_fx, project) =
        Fixture::new().file("bot/schedules/a.toml", "cron = \"0 0 9 * * *\"\nprompt = \"Go.\"\n").load();
    only(&project, "invalid_cron").error().file("bot/schedules/a.toml").line(1);
}

#[test]
fn same_id_in_md_and_toml_clashes() {
    //! Guards: `a.md` and `a.toml` both define schedule `a`.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.md", "---\ncron: \"0 9 * * *\"\n---\nGo.\n")
        .file("bot/schedules/a.toml", "cron = \"0 10 * * *\"\nprompt = \"Go.\"\n")
        .load();
    only(&project, "name_clash").error().file("bot/schedules/a.toml");
}

#[test]
fn receive_naming_an_unknown_channel_is_an_error() {
    //! Guards: receive must name a channel under channels/.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.toml", "cron = \"0 9 * * *\"\nreceive = { channel = \"nope\", message = \"hi\" }\n")
        .load();
    only(&project, "unknown_channel").error().file("bot/schedules/a.toml");
}

#[test]
fn exactly_one_action_is_required() {
    //! Guards: none, or more than one, of prompt/run/receive is schedule_body.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.toml", "cron = \"0 9 * * *\"\n")
        .file("bot/schedules/b.toml", "cron = \"0 9 * * *\"\nprompt = \"x\"\nrun = [\"y\"]\n")
        .load();
    assert_eq!(super::all_with(&project, "schedule_body").len(), 2);
    find(&project, "schedule_body").error();
}

#[test]
fn empty_prompts_and_missing_cron_are_errors() {
    //! Guards: a Markdown schedule needs cron frontmatter and a non-empty body.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/a.md", "---\ncron: \"0 9 * * *\"\n---\n\n")
        .file("bot/schedules/b.md", "Just a prompt.\n")
        .load();
    only(&project, "empty_prompt").error().file("bot/schedules/a.md");
    only(&project, "missing_field").error().file("bot/schedules/b.md").line(1);
}
