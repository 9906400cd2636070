//! `GET /v1/openapi.json`: an OpenAPI 3.1 document of the routes this host serves, built from
//! the route catalog ([`catalog`]) and the request and response types' JSON Schemas (schemars,
//! draft 2020-12, the dialect of OpenAPI 3.1). Only routes the serve options enable are listed;
//! in the multi-agent layout agent routes sit under `/{agent}`, whose values are the mounted
//! slugs. The `openapi` tests check the catalog against the router's routes both ways.

use axum::Json;
use axum::extract::State;
use bdk_protocol::http::ErrorResponse;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::state::{AppState, Mode, ServeOptions};

pub mod catalog;
pub mod op;

pub use catalog::catalog;
pub use op::{Op, Scope, When};

/// Whether `op` is served under `options`.
pub fn served(op: &Op, options: &ServeOptions) -> bool {
    let when = match op.when {
        When::Always => true,
        When::Dev => options.dev,
        When::NoControlPlane => !options.control_plane,
        When::Playground => options.playground,
        When::Docs => options.docs,
        When::Metrics => options.metrics,
    };
    when && !(op.multi_only && options.mode == Mode::Single)
}

/// The document for `state`.
pub fn document(state: &AppState) -> Value {
    let mut generator =
        SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas/".into()).into_generator();
    let slugs: Vec<&str> = state.agents.iter().map(|a| a.slug()).collect();
    let multi = state.options.mode == Mode::Multi;
    let agent_param = json!({
        "name": "agent", "in": "path", "required": true,
        "description": "The agent's slug (see `GET /v1/agents`).",
        "schema": {"type": "string", "enum": slugs},
    });
    let mut paths = Map::new();
    for op in catalog().iter().filter(|op| served(op, &state.options)) {
        let (path, param) = match (op.scope, multi) {
            (Scope::Agent, true) => (format!("/{{agent}}{}", op.openapi_path()), Some(&agent_param)),
            _ => (op.openapi_path(), None),
        };
        let operation = op.operation(&mut generator, param);
        let item = paths.entry(path).or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(item) = item {
            item.insert(op.method.to_ascii_lowercase(), operation);
        }
    }
    let error = generator.subschema_for::<ErrorResponse>().to_value();
    let mut schemas = generator.take_definitions(true);
    if !schemas.contains_key("ErrorResponse") {
        schemas.insert("ErrorResponse".into(), error);
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "BDK agent host",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP API of `bdk serve`: sessions, streams, approvals, direct tool calls, \
                            evals, schedules, the playground and the docs. See docs/http.md.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "A `--bearer-token` secret."},
                "hostToken": {"type": "http", "scheme": "bearer", "description": "The per-call BDK_HOST_TOKEN a tool command receives."},
            },
        },
    })
}

/// `GET /v1/openapi.json`.
pub async fn get_document(State(state): State<AppState>) -> Json<Value> {
    Json(document(&state))
}
