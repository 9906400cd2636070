//! JSON Schemas written as TOML tables: conversion, depth limits and compilation. One engine
//! (`jsonschema`) checks tool inputs, route bodies and the predicates of `effect` and
//! `needs_approval`, so a schema that passes here is one the runtime can use.

use serde_json::Value;

use crate::diag::{Code, Diagnostics};
use crate::source::{Pos, SourceFile};

/// Schemas nested deeper than this are refused before compilation.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// Converts a TOML value to JSON and checks that it is a usable JSON Schema.
/// `key` names the schema in messages and is used to find its line.
pub fn check(value: &toml::Value, src: &SourceFile, key: &str, diags: &mut Diagnostics) -> Option<Value> {
    check_at(value, src, key, src.pos_of_key(key), diags)
}

/// [`check`], reporting at `pos` (for schemas whose key appears more than once in the file).
pub fn check_at(
    value: &toml::Value,
    src: &SourceFile,
    key: &str,
    pos: Option<Pos>,
    diags: &mut Diagnostics,
) -> Option<Value> {
    let json = match serde_json::to_value(value) {
        Ok(json) => json,
        Err(err) => {
            diags.report(
                Code::InvalidSchema,
                Some(&src.rel),
                pos,
                format!("{}: `{key}` cannot be read as JSON: {err}", src.rel),
            );
            return None;
        }
    };
    check_json_at(json, src, key, pos, diags)
}

pub fn check_json(json: Value, src: &SourceFile, key: &str, diags: &mut Diagnostics) -> Option<Value> {
    check_json_at(json, src, key, src.pos_of_key(key), diags)
}

fn check_json_at(json: Value, src: &SourceFile, key: &str, pos: Option<Pos>, diags: &mut Diagnostics) -> Option<Value> {
    if depth(&json) > MAX_SCHEMA_DEPTH {
        diags.report(
            Code::SchemaTooDeep,
            Some(&src.rel),
            pos,
            format!("{}: `{key}` nests deeper than {MAX_SCHEMA_DEPTH} levels", src.rel),
        );
        return None;
    }
    if !(json.is_object() || json.is_boolean()) {
        diags.report(
            Code::InvalidSchema,
            Some(&src.rel),
            pos,
            format!("{}: `{key}` must be a table (a JSON Schema object)", src.rel),
        );
        return None;
    }
    match jsonschema::validator_for(&json) {
        Ok(_) => Some(json),
        Err(err) => {
            // Where in the schema: `input_schema.properties.text.type`, at that key's line.
            let segments: Vec<String> =
                err.instance_path().as_str().split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
            let mut path = vec![key.to_owned()];
            path.extend(segments.iter().cloned());
            let at = crate::parse::pos_of_path(src, &path).or(pos);
            let shown = path.join(".");
            const TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];
            let (message, hint) = match (segments.last().map(String::as_str), err.instance().as_ref()) {
                (Some("type"), Value::String(given)) => (
                    format!(
                        "`{shown}`: \"{given}\" is not a JSON Schema type{}",
                        crate::suggest::did_you_mean(given, TYPES)
                    ),
                    format!("`type` is one of {} (or a list of them)", TYPES.join(", ")),
                ),
                _ => (format!("`{shown}` is not a valid JSON Schema: {err}"), Code::InvalidSchema.hint().to_owned()),
            };
            diags.report_with_hint(Code::InvalidSchema, Some(&src.rel), at, format!("{}: {message}", src.rel), hint);
            None
        }
    }
}

/// Checks that an input schema describes an object (tool inputs and bodies are JSON objects).
pub fn check_object(value: &toml::Value, src: &SourceFile, key: &str, diags: &mut Diagnostics) -> Option<Value> {
    check_object_at(value, src, key, src.pos_of_key(key), diags)
}

/// [`check_object`], reporting at `pos`.
pub fn check_object_at(
    value: &toml::Value,
    src: &SourceFile,
    key: &str,
    pos: Option<Pos>,
    diags: &mut Diagnostics,
) -> Option<Value> {
    let json = check_at(value, src, key, pos, diags)?;
    if !json.is_object() {
        // A boolean schema is valid JSON Schema but says nothing about an object's shape.
        diags.report(
            Code::InvalidSchema,
            Some(&src.rel),
            pos,
            format!("{}: `{key}` must be a table describing an object, not `{json}`", src.rel),
        );
        return None;
    }
    match json.get("type") {
        None => Some(json),
        Some(Value::String(t)) if t == "object" => Some(json),
        Some(other) => {
            diags.report(
                Code::InvalidSchema,
                Some(&src.rel),
                pos,
                format!("{}: `{key}` must describe an object, found type {other}", src.rel),
            );
            None
        }
    }
}

/// The names under `properties` of an object schema.
pub fn property_names(schema: &Value) -> Vec<&str> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The schema used when a tool declares none: any object.
pub fn any_object() -> Value {
    serde_json::json!({ "type": "object" })
}

fn depth(value: &Value) -> usize {
    // Iterative, so hostile nesting cannot overflow the stack here.
    let mut max = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        max = max.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    max
}
