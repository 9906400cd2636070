//! A request body's top-level object, serialized straight from borrowed parts.
//!
//! The bodies used to be built as a `serde_json::Value` (every tool schema and message copied
//! into a tree, then written out). [`Object`] writes the same bytes without the tree: the
//! caller's `params.extra` keys first, in their order, then the provider's own keys. An extra
//! key the provider also sets keeps its place and takes the provider's value (what inserting
//! into the ordered map did); extra keys the provider reserves are dropped.

use std::sync::{Arc, Mutex, Weak};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::types::ToolSpec;

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

/// A tools array, each tool written as the provider's `entry` makes it.
pub(crate) struct ToolArray<'a, T>(pub &'a [ToolSpec], pub fn(&'a ToolSpec) -> T);

impl<'a, T: Serialize> Serialize for ToolArray<'a, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(self.1))
    }
}

/// A provider's encoding of a tools array.
pub(crate) type Encode = fn(&[ToolSpec]) -> serde_json::Result<Box<RawValue>>;

/// A provider's tools array as it last sent it, encoded once per tool list.
///
/// The engine builds one `Arc<[ToolSpec]>` per definitions snapshot and every step of every
/// turn shares it, so the array's bytes are the same each time: they are kept beside a weak
/// handle of the list they were made from and made again only when a request brings another
/// list. The weak handle keeps the list's allocation (not its contents), so no other list can
/// come to live at its address while the bytes are kept.
#[derive(Debug, Default)]
pub(crate) struct EncodedTools {
    last: Mutex<Option<Kept>>,
}

/// The list the bytes were made from, and the bytes.
type Kept = (Weak<[ToolSpec]>, Arc<RawValue>);

impl EncodedTools {
    /// The bytes of `tools` as `encode` writes them; `None` for no tools, or when they cannot
    /// be encoded (the body then writes them itself, and reports the error as before).
    pub fn get(&self, tools: &Arc<[ToolSpec]>, encode: Encode) -> Option<Arc<RawValue>> {
        if tools.is_empty() {
            return None;
        }
        let same = |list: &Weak<[ToolSpec]>| std::ptr::eq(list.as_ptr(), Arc::as_ptr(tools));
        if let Some((list, bytes)) = &*self.lock()
            && same(list)
        {
            return Some(bytes.clone());
        }
        let bytes: Arc<RawValue> = encode(tools).ok()?.into();
        *self.lock() = Some((Arc::downgrade(tools), bytes.clone()));
        Some(bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn list(name: &str) -> Arc<[ToolSpec]> {
        vec![ToolSpec { name: name.into(), description: "d".into(), input_schema: json!({"type": "object"}) }].into()
    }

    fn names(specs: &[ToolSpec]) -> serde_json::Result<Box<RawValue>> {
        serde_json::value::to_raw_value(&specs.iter().map(|spec| spec.name.as_str()).collect::<Vec<_>>())
    }

    #[test]
    fn a_tool_list_is_encoded_once_while_it_is_sent() {
        let cache = EncodedTools::default();
        let (one, two) = (list("one"), list("two"));
        let first = cache.get(&one, names).unwrap();
        assert_eq!(first.get(), r#"["one"]"#);
        // The same list again: the same bytes, not encoded again.
        let again = cache.get(&one, |_| panic!("encoded again")).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // Another list (even with the same contents) is encoded for itself.
        assert_eq!(cache.get(&two, names).unwrap().get(), r#"["two"]"#);
        let copy: Arc<[ToolSpec]> = one.to_vec().into();
        assert!(!Arc::ptr_eq(&cache.get(&copy, names).unwrap(), &first));
        assert!(cache.get(&Arc::from(Vec::new()), names).is_none());
    }
}
