//! Inputs are validated against the tool's schema before the body runs, with readable errors;
//! `effect` and `needs_approval` predicates are evaluated by the same engine.

use bdk_project::model::Predicate;
use bdk_tools::policy::{self, Effect};
use bdk_tools::{ProjectTools, ToolRegistry};
use serde_json::json;

use super::{Bot, call, error_text};

fn deploy(bot: &Bot) -> ProjectTools {
    let marker = bot.dir.path().join("ran");
    let mut tool = bot.command("deploy", &["sh", "-c", &format!("touch {}; echo done", marker.display())]);
    tool.input_schema = json!({
        "type": "object",
        "required": ["service", "environment"],
        "additionalProperties": false,
        "properties": {
            "service": {"type": "string", "minLength": 1},
            "environment": {"type": "string", "enum": ["staging", "production"]},
            "replicas": {"type": "integer", "minimum": 1}
        }
    });
    tool.needs_approval = Predicate::When(json!({
        "properties": {"environment": {"const": "production"}},
        "required": ["environment"]
    }));
    tool.effect_write = Predicate::When(json!({
        "not": {"properties": {"replicas": {"const": 1}}, "required": ["replicas"]}
    }));
    bot.registry(vec![tool])
}

#[tokio::test]
async fn invalid_input_is_refused_before_the_body_runs() {
    //! Guards: a bad input is an isError outcome listing each problem with its path, and the
    //! command never starts.
    let bot = Bot::new();
    let tools = deploy(&bot);
    let input = json!({"environment": "prod", "replicas": 0, "extra": true});
    let text = error_text(&call(&tools, bot.invocation("deploy", input.clone())).await);
    assert!(text.starts_with("invalid input for `deploy`"), "{text}");
    assert!(text.contains("- (root):") && text.contains("service"), "{text}");
    assert!(text.contains("- /environment:"), "{text}");
    assert!(text.contains("- /replicas:"), "{text}");
    assert!(text.contains("extra"), "{text}");
    assert!(!bot.dir.path().join("ran").exists(), "the body must not run");

    let errors = tools.validate_input("deploy", &input).unwrap_err();
    assert!(errors.len() >= 4, "{errors:?}");
    assert!(errors.iter().all(|e| e.contains(": ")), "{errors:?}");

    let good = json!({"service": "api", "environment": "staging"});
    assert!(tools.validate_input("deploy", &good).is_ok());
    assert_eq!(call(&tools, bot.invocation("deploy", good)).await.result, json!("done"));
    assert!(bot.dir.path().join("ran").exists());
}

#[tokio::test]
async fn predicates_decide_approval_and_effect() {
    //! Guards: `needs_approval` / `effect` schemas hold when the input matches, through the
    //! registry and through the pure policy functions alike.
    let bot = Bot::new();
    let tools = deploy(&bot);
    let prod = json!({"service": "api", "environment": "production"});
    let staging_one = json!({"service": "api", "environment": "staging", "replicas": 1});
    assert!(tools.needs_approval("deploy", &prod));
    assert!(!tools.needs_approval("deploy", &staging_one));
    assert_eq!(tools.effect("deploy", &prod), Effect::Write);
    assert_eq!(tools.effect("deploy", &staging_one), Effect::Read);

    let def = tools.def("deploy").unwrap();
    assert!(policy::needs_approval(def, &prod));
    assert!(!policy::needs_approval(def, &staging_one));
    assert_eq!(policy::effect_of(def, &prod), Effect::Write);
    assert_eq!(policy::effect_of(def, &staging_one), Effect::Read);

    // Unknown tools: the safe answers.
    assert_eq!(tools.effect("nope", &prod), Effect::Write);
    assert!(!tools.needs_approval("nope", &prod));
}

#[tokio::test]
async fn fixed_predicates_and_the_undeclared_effect() {
    //! Guards: `Always` predicates; an undeclared effect (the default) is a write.
    let bot = Bot::new();
    let mut read = bot.command("read_it", &["true"]);
    read.effect_write = Predicate::Always(false);
    let mut gated = bot.command("gated", &["true"]);
    gated.needs_approval = Predicate::Always(true);
    let tools = bot.registry(vec![read, gated, bot.command("plain", &["true"])]);
    assert_eq!(tools.effect("read_it", &json!({})), Effect::Read);
    assert_eq!(tools.effect("plain", &json!({})), Effect::Write);
    assert!(tools.needs_approval("gated", &json!({})));
    assert!(!tools.needs_approval("plain", &json!({})));
}

#[test]
fn a_schema_that_does_not_compile_fails_the_build() {
    //! Guards: the registry refuses an input schema the engine cannot compile, naming the tool.
    let bot = Bot::new();
    let mut tool = bot.command("broken", &["true"]);
    tool.input_schema = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
    let error = ProjectTools::empty(bot.bot()).tool(tool).build().unwrap_err();
    assert!(error.to_string().contains("broken"), "{error}");
}

#[test]
fn name_clashes_fail_the_build() {
    //! Guards: two tools with one name (here a file tool named like a built-in) are refused.
    let bot = Bot::new();
    let error = ProjectTools::empty(bot.bot()).tool(bot.command("shell", &["true"])).build().unwrap_err();
    assert!(error.to_string().contains("shell"), "{error}");
}
