//! Guards the kv store: get/put/delete/keys, overwrite, odd keys mapped safely to files.

use bdk_store::{Error, KvStore};
use serde_json::json;

use super::support::{Fixture, within};

#[tokio::test]
async fn get_put_delete() {
    let fx = Fixture::new();
    let kv = fx.store.clone();
    assert_eq!(within(kv.get("pr:acme/checkout#42")).await.unwrap(), None);
    within(kv.put("pr:acme/checkout#42", json!({"agentId": "bc-1"}))).await.unwrap();
    within(kv.put("pr:acme/checkout#42", json!({"agentId": "bc-2"}))).await.unwrap();
    within(kv.put("pr:acme/other#1", json!(3))).await.unwrap();
    within(kv.put("../escape", json!("safe"))).await.unwrap();
    assert_eq!(within(kv.get("pr:acme/checkout#42")).await.unwrap(), Some(json!({"agentId": "bc-2"})));
    assert_eq!(within(fx.reopen().get("../escape")).await.unwrap(), Some(json!("safe")));
    assert!(!fx.dir.path().join("escape").exists(), "keys never leave kv/");

    assert_eq!(within(kv.keys("pr:acme/")).await.unwrap(), ["pr:acme/checkout#42", "pr:acme/other#1"]);
    assert_eq!(within(kv.keys("")).await.unwrap().len(), 3);

    assert!(within(kv.delete("pr:acme/other#1")).await.unwrap());
    assert!(!within(kv.delete("pr:acme/other#1")).await.unwrap());
    assert_eq!(within(kv.get("pr:acme/other#1")).await.unwrap(), None);
    assert_eq!(within(kv.keys("pr:")).await.unwrap(), ["pr:acme/checkout#42"]);
}

#[tokio::test]
async fn invalid_keys_are_rejected() {
    let fx = Fixture::new();
    let err = within(fx.store.put("", json!(1))).await.unwrap_err();
    assert!(matches!(err, Error::InvalidKey { reason: "empty", .. }), "{err}");
    let long = "/".repeat(100);
    let err = within(fx.store.get(&long)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidKey { reason: "too long", .. }), "{err}");
}
