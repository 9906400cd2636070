//! One catalog entry ([`Op`]): a route's method, path, scope, the condition it is served under,
//! and what it takes and answers, built with small chained calls so a registration stays one
//! line. Rendering an entry into an OpenAPI operation is here too; the document is `mod.rs`'s.

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// Where the route sits: under each agent's base path, or once above all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Agent,
    Host,
}

/// The serve option a route depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// `--dev`.
    Dev,
    /// `--no-control-plane`.
    NoControlPlane,
    /// Not `--no-playground`.
    Playground,
    /// Not `--no-docs`.
    Docs,
    /// `--metrics`.
    Metrics,
}

/// What admits a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// The serve auth chain (loopback, bearer token or anonymous).
    Chain,
    /// Nothing: public.
    Open,
    /// A live per-call host token (tool commands only).
    HostToken,
}

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// A success body.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// JSON of a Rust type.
    Json(SchemaFn),
    /// A JSON object (`{ok: true, ...}` for the session API).
    Object,
    Ndjson,
    Html,
    /// Whatever the file is (assets).
    Any,
    /// A redirect (303) to where the page is.
    Redirect,
}

/// A request body.
#[derive(Debug, Clone, Copy)]
pub enum RequestBody {
    Json(SchemaFn),
    /// A JSON object with these required keys.
    Object(&'static [&'static str]),
}

/// A query parameter.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    pub name: &'static str,
    pub kind: &'static str,
    pub description: &'static str,
}

/// One route.
#[derive(Debug, Clone)]
pub struct Op {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    pub scope: Scope,
    /// Served only in the multi-agent layout (host routes the single layout does not have).
    pub multi_only: bool,
    pub when: When,
    pub auth: Auth,
    pub tag: &'static str,
    pub body: Option<RequestBody>,
    pub answer: Answer,
    pub success: u16,
    pub queries: Vec<Query>,
    /// Error statuses beyond the ones every route can answer.
    pub errors: Vec<u16>,
}

/// Starts an entry: an agent route behind the auth chain answering a JSON object.
pub fn op(method: &'static str, path: &'static str, summary: &'static str) -> Op {
    Op {
        method,
        path,
        summary,
        scope: Scope::Agent,
        multi_only: false,
        when: When::Always,
        auth: Auth::Chain,
        tag: "agents",
        body: None,
        answer: Answer::Object,
        success: 200,
        queries: Vec::new(),
        errors: Vec::new(),
    }
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

impl Op {
    pub fn host(mut self) -> Self {
        self.scope = Scope::Host;
        self
    }
    pub fn multi(mut self) -> Self {
        self.multi_only = true;
        self
    }
    pub fn when(mut self, when: When) -> Self {
        self.when = when;
        self
    }
    pub fn open(self) -> Self {
        self.auth(Auth::Open)
    }
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }
    pub fn tag(mut self, tag: &'static str) -> Self {
        self.tag = tag;
        self
    }
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some(RequestBody::Json(schema_of::<T>));
        self
    }
    pub fn body_object(mut self, required: &'static [&'static str]) -> Self {
        self.body = Some(RequestBody::Object(required));
        self
    }
    pub fn json<T: JsonSchema>(mut self) -> Self {
        self.answer = Answer::Json(schema_of::<T>);
        self
    }
    pub fn object(mut self) -> Self {
        self.answer = Answer::Object;
        self
    }
    pub fn ndjson(mut self) -> Self {
        self.answer = Answer::Ndjson;
        self
    }
    pub fn html(mut self) -> Self {
        self.answer = Answer::Html;
        self
    }
    pub fn any(mut self) -> Self {
        self.answer = Answer::Any;
        self
    }
    pub fn redirect(mut self) -> Self {
        self.answer = Answer::Redirect;
        self.success = 303;
        self
    }
    pub fn accepted(mut self) -> Self {
        self.success = 202;
        self
    }
    pub fn not_found(mut self) -> Self {
        self.errors.push(404);
        self
    }
    pub fn conflict(mut self) -> Self {
        self.errors.push(409);
        self
    }
    pub fn start_index(mut self) -> Self {
        self.queries.push(Query {
            name: "startIndex",
            kind: "integer",
            description: "The first event index to return (default 0).",
        });
        self
    }
    pub fn query(mut self, name: &'static str, kind: &'static str, description: &'static str) -> Self {
        self.queries.push(Query { name, kind, description });
        self
    }
    pub fn session_id_query(mut self) -> Self {
        self.queries.push(Query { name: "sessionId", kind: "string", description: "Only this session's reminders." });
        self
    }

    /// The path parameters, in order: `{name}` and `{*name}`.
    pub fn path_params(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        let mut rest = self.path;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else { break };
            names.push(rest[open + 1..open + close].trim_start_matches('*'));
            rest = &rest[open + close + 1..];
        }
        names
    }

    /// The path as OpenAPI writes it (`{*rest}` becomes `{rest}`).
    pub fn openapi_path(&self) -> String {
        self.path.replace("{*", "{")
    }

    /// The OpenAPI operation object. `agent_param` is the `{agent}` parameter of the
    /// multi-agent layout, for agent routes there.
    pub fn operation(&self, generator: &mut SchemaGenerator, agent_param: Option<&Value>) -> Value {
        let mut parameters: Vec<Value> = agent_param.into_iter().cloned().collect();
        for name in self.path_params() {
            parameters.push(json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}));
        }
        for query in &self.queries {
            let mut schema = json!({"type": query.kind});
            if query.kind == "integer" {
                schema["minimum"] = json!(0);
            }
            parameters.push(json!({
                "name": query.name, "in": "query", "required": false,
                "description": query.description, "schema": schema,
            }));
        }
        let mut operation = Map::new();
        operation.insert("operationId".into(), json!(self.operation_id(agent_param.is_some())));
        operation.insert("summary".into(), json!(self.summary));
        operation.insert("tags".into(), json!([self.tag]));
        if !parameters.is_empty() {
            operation.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some(body) = self.body {
            let schema = match body {
                RequestBody::Json(schema) => schema(generator).to_value(),
                RequestBody::Object(required) => json!({"type": "object", "required": required}),
            };
            operation.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": schema}}}),
            );
        }
        operation.insert("responses".into(), Value::Object(self.responses(generator)));
        match self.auth {
            Auth::Open => {
                operation.insert("security".into(), json!([]));
            }
            Auth::Chain => {
                // Loopback callers need no credentials under the default chain.
                operation.insert("security".into(), json!([{}, {"bearer": []}]));
            }
            Auth::HostToken => {
                operation.insert("security".into(), json!([{"hostToken": []}]));
            }
        }
        Value::Object(operation)
    }

    fn operation_id(&self, per_agent: bool) -> String {
        let mut id = self.method.to_ascii_lowercase();
        if per_agent {
            id.push_str("_agent");
        } else if self.scope == Scope::Host {
            id.push_str("_host");
        }
        for part in self.path.split('/').filter(|p| !p.is_empty()) {
            id.push('_');
            id.extend(part.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).filter(|c| *c != '_'));
        }
        if self.path == "/" {
            id.push_str("_index");
        }
        id
    }

    fn responses(&self, generator: &mut SchemaGenerator) -> Map<String, Value> {
        let mut responses = Map::new();
        let ok = match self.answer {
            Answer::Json(schema) => {
                json!({"description": "Success", "content": {"application/json": {"schema": schema(generator).to_value()}}})
            }
            Answer::Object => json!({
                "description": "Success",
                "content": {"application/json": {"schema": {"type": "object"}}},
            }),
            Answer::Ndjson => json!({
                "description": "One event envelope per line",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }),
            Answer::Html => {
                json!({"description": "An HTML page", "content": {"text/html": {"schema": {"type": "string"}}}})
            }
            Answer::Any => json!({"description": "The file", "content": {"*/*": {"schema": {"type": "string"}}}}),
            Answer::Redirect => json!({"description": "Where the page is (Location)"}),
        };
        responses.insert(self.success.to_string(), ok);
        let error = json!({
            "description": "An error",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
        });
        let mut statuses: Vec<u16> = self.errors.clone();
        if self.body.is_some() {
            statuses.extend([400, 413, 415]);
        } else if !self.queries.is_empty() {
            statuses.push(400);
        }
        match self.auth {
            Auth::Chain => statuses.extend([401, 403]),
            Auth::HostToken => statuses.push(401),
            Auth::Open => {}
        }
        if !self.path_params().is_empty() && self.auth == Auth::Chain {
            statuses.push(404);
        }
        statuses.sort_unstable();
        statuses.dedup();
        for status in statuses {
            responses.insert(status.to_string(), error.clone());
        }
        responses
    }
}

#[cfg(test)]
mod tests {
    use super::op;

    #[test]
    fn path_params_read_plain_and_wildcard_segments() {
        let op = op("POST", "/v1/session/{session_id}/approvals/{call_id}", "x");
        assert_eq!(op.path_params(), ["session_id", "call_id"]);
        let docs = op_wild();
        assert_eq!(docs.path_params(), ["path"]);
        assert_eq!(docs.openapi_path(), "/docs/{path}");
    }

    fn op_wild() -> super::Op {
        op("GET", "/docs/{*path}", "x")
    }
}
