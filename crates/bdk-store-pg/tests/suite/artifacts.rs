//! Artifacts in PostgreSQL: a key is updated in place and owners do not share keys, content is
//! kept (and kept when a later tag brings none), the retention cap evicts the oldest-updated,
//! tags racing on two replicas make one record, and content over the limit is refused.

use std::sync::Arc;

use bdk_store::artifacts::MAX_CONTENT_BYTES;
use bdk_store::{ArtifactQuery, ArtifactStore, ArtifactTag, ContentInfo};
use bdk_test_support::postgres;

use super::support::PgInstance;

fn tag(principal: &str, key: &str) -> ArtifactTag {
    ArtifactTag {
        kind: "report".into(),
        key: key.into(),
        title: Some(format!("Report {key}")),
        data: None,
        principal: principal.into(),
        session_id: None,
        source: "host".into(),
        content: None,
    }
}

fn with_content(mut tag: ArtifactTag, bytes: &[u8]) -> ArtifactTag {
    let info = ContentInfo { file_name: "r.md".into(), content_type: "text/markdown".into(), size: bytes.len() as u64 };
    tag.content = Some((info, bytes.to_vec()));
    tag
}

async fn two_replicas(name: &str) -> Option<(PgInstance, PgInstance)> {
    let db = Arc::new(postgres::fresh(name).await?);
    let a = PgInstance::open(db.clone(), Arc::new(tempfile::tempdir().unwrap())).await;
    let b = PgInstance::open(db, Arc::new(tempfile::tempdir().unwrap())).await;
    Some((a, b))
}

#[tokio::test]
async fn a_key_is_updated_in_place_and_owners_do_not_share_keys() {
    let Some((a, b)) = two_replicas("artifacts_keys").await else { return };
    let first = a.store.tag(tag("alice", "w1"), None).await.unwrap();
    assert!(first.created);
    let mut again = with_content(tag("alice", "w1"), b"hi");
    again.title = Some("Renamed".into());
    let second = b.store.tag(again, None).await.unwrap();
    assert!(!second.created);
    assert_eq!(second.record.id, first.record.id);
    assert_eq!(second.record.title.as_deref(), Some("Renamed"));
    // A later tag without content keeps it.
    let third = a.store.tag(tag("alice", "w1"), None).await.unwrap();
    assert_eq!(third.record.content.as_ref().map(|c| c.size), Some(2));
    assert_eq!(b.store.content(&first.record.id).await.unwrap().unwrap(), b"hi");
    let other = a.store.tag(tag("bob", "w1"), None).await.unwrap();
    assert_ne!(other.record.id, first.record.id);
    assert!(a.store.content(&other.record.id).await.unwrap().is_none());
    let alice = ArtifactQuery { principal: Some("alice".into()), ..Default::default() };
    assert_eq!(b.store.list(&alice).await.unwrap().len(), 1);
    assert_eq!(b.store.get(&first.record.id).await.unwrap().unwrap().title.as_deref(), Some("Report w1"));
    assert!(a.store.get("art_../../x").await.unwrap().is_none());
    let limited = ArtifactQuery { limit: Some(1), ..Default::default() };
    assert_eq!(a.store.list(&limited).await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_cap_evicts_the_oldest_updated() {
    let Some((a, b)) = two_replicas("artifacts_cap").await else { return };
    let first = a.store.tag(tag("p", "a"), Some(2)).await.unwrap().record.id;
    let second = b.store.tag(tag("p", "b"), Some(2)).await.unwrap().record.id;
    // Touching `a` makes `b` the oldest-updated.
    a.store.tag(tag("p", "a"), Some(2)).await.unwrap();
    let third = b.store.tag(tag("p", "c"), Some(2)).await.unwrap();
    assert_eq!(third.evicted, vec![second.clone()]);
    let left: Vec<String> = a.store.list(&ArtifactQuery::default()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(left, vec![third.record.id, first]);
    assert!(a.store.get(&second).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_racing_on_two_replicas_make_one_record() {
    let Some((a, b)) = two_replicas("artifacts_race").await else { return };
    let (a, b) = (Arc::new(a), Arc::new(b));
    let mut tags = Vec::new();
    for i in 0..20 {
        let replica = if i % 2 == 0 { a.clone() } else { b.clone() };
        tags.push(tokio::spawn(async move { replica.store.tag(tag("p", "same"), Some(5)).await.unwrap() }));
    }
    let mut created = 0;
    for t in tags {
        created += usize::from(t.await.unwrap().created);
    }
    assert_eq!(created, 1);
    assert_eq!(a.store.list(&ArtifactQuery::default()).await.unwrap().len(), 1);
}

#[tokio::test]
async fn content_over_the_limit_is_refused() {
    let Some((a, _b)) = two_replicas("artifacts_big").await else { return };
    let big = vec![b'x'; MAX_CONTENT_BYTES + 1];
    let error = a.store.tag(with_content(tag("p", "big"), &big), None).await.unwrap_err();
    assert!(matches!(error, bdk_store::Error::TooLarge { .. }), "{error}");
    assert!(a.store.list(&ArtifactQuery::default()).await.unwrap().is_empty());
}
