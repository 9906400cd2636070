//! One validation engine (`jsonschema`) for tool inputs and for the schema predicates of
//! `effect` and `needs_approval` (docs/decisions/0003). Schemas are compiled once, when a
//! registry is built; errors come back as readable `path: message` lines.

use bdk_project::model::{Predicate, ToolDef};
use jsonschema::Validator;
use serde_json::Value;

use crate::error::{Error, Result};

/// At most this many errors are listed for one input.
pub const MAX_ERRORS: usize = 20;

/// A compiled input schema.
#[derive(Debug)]
pub struct InputSchema {
    validator: Validator,
}

impl InputSchema {
    pub fn compile(schema: &Value) -> std::result::Result<Self, String> {
        jsonschema::validator_for(schema).map(|validator| Self { validator }).map_err(|e| e.to_string())
    }

    /// `Ok` when `input` matches; otherwise every problem (up to [`MAX_ERRORS`]) as
    /// `/path: message` (`(root)` for the input itself).
    pub fn check(&self, input: &Value) -> std::result::Result<(), Vec<String>> {
        if self.validator.is_valid(input) {
            return Ok(());
        }
        let mut errors: Vec<String> = Vec::new();
        for error in self.validator.iter_errors(input) {
            if errors.len() == MAX_ERRORS {
                errors.push(format!("(more errors after the first {MAX_ERRORS})"));
                break;
            }
            let path = error.instance_path().to_string();
            let path = if path.is_empty() { "(root)".to_owned() } else { path };
            errors.push(format!("{path}: {error}"));
        }
        if errors.is_empty() {
            errors.push("(root): the input does not match the schema".to_owned());
        }
        Err(errors)
    }
}

/// A compiled [`Predicate`]: holds when the input matches its schema.
#[derive(Debug)]
pub enum CompiledPredicate {
    Always(bool),
    When(Validator),
}

impl CompiledPredicate {
    pub fn compile(predicate: &Predicate) -> std::result::Result<Self, String> {
        match predicate {
            Predicate::Always(b) => Ok(Self::Always(*b)),
            Predicate::When(schema) => jsonschema::validator_for(schema).map(Self::When).map_err(|e| e.to_string()),
        }
    }

    pub fn holds(&self, input: &Value) -> bool {
        match self {
            Self::Always(b) => *b,
            Self::When(validator) => validator.is_valid(input),
        }
    }
}

/// Evaluates a predicate without keeping the compiled form. A schema that does not compile
/// holds (the safe answer: a write, an approval).
pub fn predicate_holds(predicate: &Predicate, input: &Value) -> bool {
    CompiledPredicate::compile(predicate).map(|p| p.holds(input)).unwrap_or(true)
}

/// Everything about one tool that needs a compiled schema.
#[derive(Debug)]
pub struct CompiledTool {
    pub input: InputSchema,
    pub effect_write: CompiledPredicate,
    pub needs_approval: CompiledPredicate,
}

impl CompiledTool {
    pub fn compile(tool: &ToolDef) -> Result<Self> {
        let schema_error = |what: &'static str| {
            let tool = tool.name.clone();
            move |message: String| Error::Schema { tool, what, message }
        };
        Ok(Self {
            input: InputSchema::compile(&tool.input_schema).map_err(schema_error("input_schema"))?,
            effect_write: CompiledPredicate::compile(&tool.effect_write).map_err(schema_error("effect"))?,
            needs_approval: CompiledPredicate::compile(&tool.needs_approval).map_err(schema_error("needs_approval"))?,
        })
    }
}

/// The message the model reads for an input that failed validation.
pub fn describe_errors(tool: &str, errors: &[String]) -> String {
    let mut message = format!("invalid input for `{tool}`; fix these and call it again:");
    for error in errors {
        message.push_str("\n- ");
        message.push_str(error);
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn errors_name_the_path() {
        let schema = InputSchema::compile(&json!({
            "type": "object",
            "required": ["city"],
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}
        }))
        .unwrap();
        assert!(schema.check(&json!({"city": "Oslo"})).is_ok());
        let errors = schema.check(&json!({"days": 0})).unwrap_err();
        assert!(errors.iter().any(|e| e.starts_with("(root):") && e.contains("city")), "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("/days:")), "{errors:?}");
    }

    #[test]
    fn predicates_hold_when_the_input_matches() {
        let p = Predicate::When(json!({"properties": {"env": {"const": "prod"}}, "required": ["env"]}));
        assert!(predicate_holds(&p, &json!({"env": "prod"})));
        assert!(!predicate_holds(&p, &json!({"env": "dev"})));
        assert!(!predicate_holds(&p, &json!({})));
        assert!(predicate_holds(&Predicate::Always(true), &json!({})));
    }
}
