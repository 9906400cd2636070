//! A request body's top-level object, serialized straight from borrowed parts.
//!
//! The bodies used to be built as a `serde_json::Value` (every tool schema and message copied
//! into a tree, then written out). [`Object`] writes the same bytes without the tree: the
//! caller's `params.extra` keys first, in their order, then the provider's own keys. An extra
//! key the provider also sets keeps its place and takes the provider's value (what inserting
//! into the ordered map did); extra keys the provider reserves are dropped.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// The top-level object of a request body. `F` is the provider's own field type.
pub(crate) struct Object<'a, F> {
    /// `params.extra`: copied as they are, except `reserved` keys.
    pub extra: &'a Map<String, Value>,
    /// Keys the provider owns: an extra key by one of these names is not sent.
    pub reserved: &'a [&'a str],
    /// The provider's fields, in order.
    pub fields: Vec<(&'static str, F)>,
}

impl<F> Object<'_, F> {
    /// Whether the extra key `key` is written (and holds its place in the object).
    fn extra_kept(&self, key: &str) -> bool {
        self.extra.contains_key(key) && !self.reserved.contains(&key)
    }
}

impl<F: Serialize> Serialize for Object<'_, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.extra {
            if self.reserved.contains(&key.as_str()) {
                continue;
            }
            match self.fields.iter().find(|(own, _)| own == key) {
                Some((_, field)) => map.serialize_entry(key, field)?,
                None => map.serialize_entry(key, value)?,
            }
        }
        for (key, field) in &self.fields {
            if !self.extra_kept(key) {
                map.serialize_entry(key, field)?;
            }
        }
        map.end()
    }
}
