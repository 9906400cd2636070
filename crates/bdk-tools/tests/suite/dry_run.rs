//! Dry-run sessions run reads and answer writes with a stub (`dry_run_result`, or "Operation
//! acknowledged."), marked `stubbed`, without running the body.

use bdk_project::model::Predicate;
use bdk_tools::policy;
use serde_json::json;

use super::{Bot, call};

#[tokio::test]
async fn writes_are_stubbed_and_reads_run() {
    //! Guards: in a dry run a write returns its stub (body not run), a read runs as usual, and
    //! outside a dry run the write runs.
    let bot = Bot::new();
    let marker = bot.dir.path().join("published");
    let mut publish = bot.command("publish", &["sh", "-c", &format!("touch {}; echo published", marker.display())]);
    publish.dry_run_result = Some(json!({"published": false}));
    let mut lookup = bot.command("lookup", &["echo", "\"looked\""]);
    lookup.effect_write = Predicate::Always(false);
    let plain = bot.command("plain", &["sh", "-c", &format!("touch {}", marker.display())]);
    let tools = bot.registry(vec![publish, lookup, plain]);

    let mut invocation = bot.invocation("publish", json!({}));
    invocation.dry_run = true;
    let outcome = call(&tools, invocation).await;
    assert!(outcome.stubbed && !outcome.is_error, "{outcome:?}");
    assert_eq!(outcome.result, json!({"published": false}));

    let mut invocation = bot.invocation("plain", json!({}));
    invocation.dry_run = true;
    let outcome = call(&tools, invocation).await;
    assert!(outcome.stubbed);
    assert_eq!(outcome.result, json!(policy::DEFAULT_DRY_RUN_RESULT));
    assert!(!marker.exists(), "no write body ran");

    let mut invocation = bot.invocation("lookup", json!({}));
    invocation.dry_run = true;
    let outcome = call(&tools, invocation).await;
    assert!(!outcome.stubbed);
    assert_eq!(outcome.result, json!("looked"));

    let outcome = call(&tools, bot.invocation("publish", json!({}))).await;
    assert!(!outcome.stubbed);
    assert_eq!(outcome.result, json!("published"));
    assert!(marker.exists());
}

#[tokio::test]
async fn a_predicate_effect_decides_per_input() {
    //! Guards: with an `[effect]` schema, a dry run stubs the matching inputs and runs the rest.
    let bot = Bot::new();
    let mut cleanup = bot.command("cleanup", &["echo", "\"ran\""]);
    cleanup.effect_write = Predicate::When(json!({"properties": {"dry": {"const": false}}, "required": ["dry"]}));
    let tools = bot.registry(vec![cleanup]);
    for (input, stubbed) in [(json!({"dry": false}), true), (json!({"dry": true}), false)] {
        let mut invocation = bot.invocation("cleanup", input);
        invocation.dry_run = true;
        assert_eq!(call(&tools, invocation).await.stubbed, stubbed);
    }
}

#[test]
fn the_stub_is_the_declared_result_or_the_acknowledgement() {
    //! Guards: `dry_run_stub` returns `dry_run_result` when declared.
    let bot = Bot::new();
    let mut tool = bot.command("t", &["true"]);
    assert_eq!(policy::dry_run_stub(&tool), json!("Operation acknowledged."));
    tool.dry_run_result = Some(json!([1, 2]));
    assert_eq!(policy::dry_run_stub(&tool), json!([1, 2]));
}
