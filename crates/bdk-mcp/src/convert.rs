//! MCP tool results as the model and host code read them. A result with `structuredContent`
//! keeps it (that object is the result); a text-only result is its text; anything else (images,
//! resources) is the MCP content list as JSON. `isError` stays a tool error, never a failure.

use bdk_tools::ToolOutcome;
use bdk_tools::host::McpCallResult;
use rmcp::model::CallToolResult;
use serde_json::Value;

/// The result value the model sees.
pub fn result_value(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    let texts: Option<Vec<&str>> = result.content.iter().map(|c| c.as_text().map(|t| t.text.as_str())).collect();
    match texts {
        Some(texts) => Value::String(texts.join("\n")),
        None => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    }
}

/// The outcome of one MCP tool call, as a registry call returns it.
pub fn outcome(result: &CallToolResult) -> ToolOutcome {
    let value = result_value(result);
    if result.is_error.unwrap_or(false) {
        ToolOutcome { is_error: true, result: value, stubbed: false }
    } else {
        ToolOutcome::ok(value)
    }
}

/// The raw-ish MCP shape host code gets (`host.mcp.callTool`).
pub fn call_result(result: &CallToolResult) -> McpCallResult {
    McpCallResult {
        is_error: result.is_error.unwrap_or(false),
        content: serde_json::to_value(&result.content).unwrap_or(Value::Array(Vec::new())),
        structured_content: result.structured_content.clone(),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::Content;
    use serde_json::json;

    use super::*;

    #[test]
    fn text_results_are_their_text() {
        let result = CallToolResult::success(vec![Content::text("a"), Content::text("b")]);
        assert_eq!(outcome(&result), ToolOutcome::ok(json!("a\nb")));
    }

    #[test]
    fn structured_content_is_kept() {
        let mut result = CallToolResult::success(vec![Content::text("{\"x\":1}")]);
        result.structured_content = Some(json!({"x": 1}));
        assert_eq!(outcome(&result).result, json!({"x": 1}));
        assert_eq!(call_result(&result).structured_content, Some(json!({"x": 1})));
    }

    #[test]
    fn errors_stay_tool_errors() {
        let result = CallToolResult::error(vec![Content::text("bad")]);
        let outcome = outcome(&result);
        assert!(outcome.is_error);
        assert_eq!(outcome.result, json!("bad"));
    }
}
