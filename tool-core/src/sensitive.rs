//! Sensitive values: the parts of a tool's input and output that must not reach records,
//! events, approval prompts, logs or exported history, while the tool still gets them.
//!
//! A value is sensitive when its schema says `"writeOnly": true`. Three things write that:
//! `#[toolwright(sensitive)]` on a field of an argument struct (the registry marks the field
//! when it builds the tool), the [`Sensitive`] wrapper on a field at any depth of an argument or
//! output type, and a remote server or a tool defined at run time whose schema says it. From
//! the schema the registry computes, once per tool, [`SensitivePaths`]: where in an input (or a
//! structured output) the values sit. The runtime replaces them with [`REDACTED`] wherever a
//! value leaves the call, and seals the input it must keep to run the call later.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// What stands in for a sensitive value wherever it is not kept.
pub const REDACTED: &str = "[redacted]";

/// A sensitive value: the tool gets it as it came, every record, event, prompt and log shows
/// [`REDACTED`].
///
/// Use it for a field of an argument struct at any depth (on a top-level field,
/// `#[toolwright(sensitive)]` does the same and keeps the plain type), and for a field of an
/// output: the output the runtime records, emits, serves and shows the model has
/// [`REDACTED`] in its place; a `to_model_output` projection, which gets the typed output, is
/// the only way to show it to the model. `Debug` and `Display` print [`REDACTED`], so a
/// `tracing::debug!(?args)` leaks nothing.
///
/// ```
/// use toolwright_core::sensitive::{Sensitive, REDACTED};
/// let pin: Sensitive<String> = serde_json::from_str("\"4711\"").unwrap();
/// assert_eq!(pin.expose(), "4711");
/// assert_eq!(format!("{pin:?} {pin}"), format!("{REDACTED} {REDACTED}"));
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Sensitive<T>(T);

impl<T> Sensitive<T> {
    /// Wraps `value`.
    pub const fn new(value: T) -> Self {
        Sensitive(value)
    }

    /// The value, by reference: the one place a reader sees it used.
    pub const fn expose(&self) -> &T {
        &self.0
    }

    /// The value.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> From<T> for Sensitive<T> {
    fn from(value: T) -> Self {
        Sensitive(value)
    }
}

impl<T> fmt::Debug for Sensitive<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> fmt::Display for Sensitive<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Sensitive<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Sensitive)
    }
}

thread_local! {
    /// Set while a tool's output is serialized for the runtime ([`redacting`]).
    static REDACTING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `serialize` with every [`Sensitive`] serializing as [`REDACTED`]: how a tool's typed
/// output becomes the value the runtime keeps. Elsewhere (a durable step's journaled value, a
/// projection) a `Sensitive` serializes as its value.
pub fn redacting<R>(serialize: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            REDACTING.with(|flag| flag.set(self.0));
        }
    }
    let _reset = Reset(REDACTING.with(|flag| flag.replace(true)));
    serialize()
}

impl<T: Serialize> Serialize for Sensitive<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if REDACTING.with(Cell::get) {
            serializer.serialize_str(REDACTED)
        } else {
            self.0.serialize(serializer)
        }
    }
}

impl<T: JsonSchema> JsonSchema for Sensitive<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Sensitive_{}", T::schema_name()).into()
    }

    fn schema_id() -> Cow<'static, str> {
        format!("toolwright::Sensitive<{}>", T::schema_id()).into()
    }

    /// What the model fills in: `T`'s schema, marked `writeOnly`. What an output carries (the
    /// schema for serializing): always [`REDACTED`].
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        if generator.contract().is_serialize() {
            return schemars::json_schema!({ "type": "string", "const": REDACTED, "writeOnly": true });
        }
        let mut schema = generator.subschema_for::<T>();
        schema.insert("writeOnly".into(), true.into());
        schema
    }
}

/// Marks the top-level properties `names` of an object schema `writeOnly` (what
/// `#[toolwright(sensitive)]` asks); names the schema lacks are left alone.
pub fn mark_properties(schema: &mut Value, names: &[&str]) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for name in names {
        if let Some(Value::Object(property)) = properties.get_mut(*name) {
            property.insert("writeOnly".into(), Value::Bool(true));
        }
    }
}

/// One step into a JSON value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Where a schema's sensitive values are in a value it describes: every place the schema marks
/// `"writeOnly": true`, found by walking the value and the schema together (through
/// properties, map values, array and tuple items, `anyOf`/`oneOf`/`allOf`, conditionals and
/// `$ref`s, recursive types to any depth). Fails closed: where a `$ref` cannot be resolved or
/// the walk grows too large, the whole value there counts as sensitive. Built once per tool;
/// a schema without `writeOnly` anywhere costs nothing per call.
///
/// ```
/// use serde_json::json;
/// use toolwright_core::sensitive::SensitivePaths;
/// let schema = json!({"type": "object", "properties": {
///     "user": {"type": "string"},
///     "pin": {"type": "string", "writeOnly": true},
///     "cards": {"type": "array", "items": {"type": "object", "properties": {
///         "number": {"type": "string", "writeOnly": true}}}}}});
/// let paths = SensitivePaths::of_schema(&schema);
/// let mut input = json!({"user": "ada", "pin": "4711", "cards": [{"number": "4242"}]});
/// assert!(paths.redact(&mut input));
/// assert_eq!(input, json!({"user": "ada", "pin": "[redacted]", "cards": [{"number": "[redacted]"}]}));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SensitivePaths {
    /// The schema, when something in it is `writeOnly`.
    schema: Option<Arc<Value>>,
}

/// Most schema nodes one walk visits before it gives up and hides what it has not looked at.
const MAX_VISITS: usize = 100_000;
/// Most `$ref`s and combinators followed without moving into the value.
const MAX_HOPS: usize = 64;

impl SensitivePaths {
    /// The sensitive places of values that `schema` describes.
    pub fn of_schema(schema: &Value) -> SensitivePaths {
        SensitivePaths {
            schema: marks_anything(schema, 0).then(|| Arc::new(schema.clone())),
        }
    }

    /// Whether nothing is sensitive (most tools): every operation is then free.
    pub fn is_empty(&self) -> bool {
        self.schema.is_none()
    }

    /// The places in `value` that hold a sensitive value (`null`s left out), outermost only.
    fn locate(&self, value: &Value) -> Vec<Vec<Seg>> {
        let Some(schema) = &self.schema else {
            return Vec::new();
        };
        let mut walk = Walk {
            root: schema,
            path: Vec::new(),
            found: Vec::new(),
            visits: 0,
        };
        walk.node(schema, value, 0);
        let mut found = walk.found;
        found.sort();
        found.dedup();
        // A place inside another is covered by it.
        let mut outer: Vec<Vec<Seg>> = Vec::with_capacity(found.len());
        for path in found {
            if !outer.iter().any(|o| path.starts_with(o)) {
                outer.push(path);
            }
        }
        outer
    }

    /// Replaces every sensitive value in `value` with [`REDACTED`]; whether any was there.
    pub fn redact(&self, value: &mut Value) -> bool {
        let mut changed = false;
        self.for_each(value, &mut |leaf| {
            if leaf.as_str() != Some(REDACTED) {
                *leaf = Value::String(REDACTED.to_owned());
                changed = true;
            }
        });
        changed
    }

    /// `value` with its sensitive values redacted; borrowed when there are none.
    pub fn redacted<'v>(&self, value: &'v Value) -> Cow<'v, Value> {
        let places = self.locate(value);
        if places.is_empty() {
            return Cow::Borrowed(value);
        }
        let mut copy = value.clone();
        for path in places {
            if let Some(leaf) = get_mut(&mut copy, &path) {
                *leaf = Value::String(REDACTED.to_owned());
            }
        }
        Cow::Owned(copy)
    }

    /// Whether `value` holds a value at a sensitive place (`null` counts as absent).
    pub fn occurs_in(&self, value: &Value) -> bool {
        !self.is_empty() && !self.locate(value).is_empty()
    }

    /// Calls `visit` on every value at a sensitive place in `value` (`null`s skipped; a place
    /// inside another is visited as part of it): what sealing goes through.
    pub fn for_each(&self, value: &mut Value, visit: &mut dyn FnMut(&mut Value)) {
        // Most tools have no sensitive place: nothing to walk (this runs on every result).
        if self.is_empty() {
            return;
        }
        for path in self.locate(value) {
            if let Some(leaf) = get_mut(value, &path) {
                visit(leaf);
            }
        }
    }

    /// The JSON pointers of the sensitive places in `value`.
    pub fn pointers_in(&self, value: &Value) -> Vec<String> {
        self.locate(value)
            .iter()
            .map(|path| pointer(path))
            .collect()
    }

    /// The sensitive values in `value` as a message may quote them: each value's JSON, and
    /// every string and number inside it, as it is and as JSON. Texts under two characters
    /// are left out: they reveal next to nothing, and replacing them would garble every
    /// message.
    pub fn texts_in(&self, value: &Value) -> Vec<String> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut texts = Vec::new();
        for path in self.locate(value) {
            let Some(leaf) = get(value, &path) else {
                continue;
            };
            if leaf.as_str() == Some(REDACTED) {
                continue;
            }
            texts.push(leaf.to_string());
            scalars(leaf, &mut texts);
        }
        texts.retain(|text| text.chars().nth(1).is_some());
        // Longest first, so a value is replaced whole before any part of it.
        texts.sort_by_key(|text| std::cmp::Reverse(text.len()));
        texts.dedup();
        texts
    }
}

/// Every string (as it is and as JSON) and number under `value`.
fn scalars(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            texts.push(text.clone());
            texts.push(value.to_string());
        }
        Value::Number(number) => texts.push(number.to_string()),
        Value::Array(items) => items.iter().for_each(|v| scalars(v, texts)),
        Value::Object(map) => map.values().for_each(|v| scalars(v, texts)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// `message` with every text of `secrets` replaced by [`REDACTED`].
pub fn scrub(message: &str, secrets: &[String]) -> String {
    let mut out = message.to_owned();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    out
}

/// Whether `pointer` is at or inside one of `places` (JSON pointers).
pub fn is_within(pointer: &str, places: &[String]) -> bool {
    places.iter().any(|place| {
        pointer == place
            || (pointer.starts_with(place.as_str())
                && pointer.as_bytes().get(place.len()) == Some(&b'/'))
    })
}

fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Key(key) => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Seg::Index(index) => out.push_str(&index.to_string()),
        }
    }
    out
}

fn get<'v>(value: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, seg| match (seg, v) {
        (Seg::Key(key), Value::Object(map)) => map.get(key),
        (Seg::Index(index), Value::Array(items)) => items.get(*index),
        _ => None,
    })
}

fn get_mut<'v>(value: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |v, seg| match (seg, v) {
        (Seg::Key(key), Value::Object(map)) => map.get_mut(key),
        (Seg::Index(index), Value::Array(items)) => items.get_mut(*index),
        _ => None,
    })
}

/// Whether `schema` says `"writeOnly": true` anywhere (its `$defs` included).
fn marks_anything(schema: &Value, depth: usize) -> bool {
    match schema {
        Value::Object(map) => {
            map.get("writeOnly") == Some(&Value::Bool(true))
                || (depth < 256 && map.values().any(|v| marks_anything(v, depth + 1)))
        }
        Value::Array(items) => depth < 256 && items.iter().any(|v| marks_anything(v, depth + 1)),
        _ => false,
    }
}

/// One walk of a value with its schema ([`SensitivePaths::locate`]).
struct Walk<'s> {
    root: &'s Value,
    path: Vec<Seg>,
    found: Vec<Vec<Seg>>,
    visits: usize,
}

impl<'s> Walk<'s> {
    /// The value at the current path, described by `schema`; `hops` counts the `$ref`s and
    /// combinators followed since the walk last moved into the value.
    fn node(&mut self, schema: &'s Value, value: &Value, hops: usize) {
        if value.is_null() {
            return;
        }
        self.visits += 1;
        if self.visits > MAX_VISITS || hops > MAX_HOPS {
            self.hide();
            return;
        }
        let Value::Object(map) = schema else {
            return;
        };
        if map.get("writeOnly") == Some(&Value::Bool(true)) {
            self.hide();
            return;
        }
        if let Some(Value::String(reference)) = map.get("$ref") {
            match resolve(self.root, reference) {
                Some(target) => self.node(target, value, hops + 1),
                None => {
                    // A schema the walk cannot read may mark anything: hide it all.
                    self.hide();
                    return;
                }
            }
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                for branch in branches {
                    self.node(branch, value, hops + 1);
                }
            }
        }
        for key in ["then", "else"] {
            if let Some(branch) = map.get(key) {
                self.node(branch, value, hops + 1);
            }
        }
        if let Some(Value::Object(dependent)) = map.get("dependentSchemas") {
            for branch in dependent.values() {
                self.node(branch, value, hops + 1);
            }
        }
        match value {
            Value::Object(object) => self.object(map, object),
            Value::Array(items) => self.array(map, items),
            _ => {}
        }
    }

    fn object(&mut self, schema: &'s Map<String, Value>, object: &Map<String, Value>) {
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, item) in object {
            let declared = properties.and_then(|p| p.get(key));
            let mut children: Vec<&'s Value> = declared.into_iter().collect();
            // Patterns are not evaluated: each applies to every key (it can only hide more).
            if let Some(Value::Object(patterns)) = schema.get("patternProperties") {
                children.extend(patterns.values());
            }
            if declared.is_none() {
                children.extend(
                    ["additionalProperties", "unevaluatedProperties"]
                        .iter()
                        .filter_map(|k| schema.get(*k)),
                );
            }
            for child in children {
                self.step(Seg::Key(key.clone()), child, item);
            }
        }
    }

    fn array(&mut self, schema: &'s Map<String, Value>, items: &[Value]) {
        // 2020-12 `prefixItems` + `items`, or draft-07 tuple `items` + `additionalItems`.
        let (prefix, rest): (&'s [Value], Option<&'s Value>) =
            match (schema.get("prefixItems"), schema.get("items")) {
                (Some(Value::Array(prefix)), rest) => (prefix, rest),
                (None, Some(Value::Array(prefix))) => (prefix, schema.get("additionalItems")),
                (_, rest) => (&[], rest),
            };
        for (index, item) in items.iter().enumerate() {
            let child = prefix
                .get(index)
                .or(rest)
                .or_else(|| schema.get("unevaluatedItems"));
            if let Some(child) = child {
                self.step(Seg::Index(index), child, item);
            }
        }
    }

    fn step(&mut self, seg: Seg, schema: &'s Value, value: &Value) {
        self.path.push(seg);
        self.node(schema, value, 0);
        self.path.pop();
    }

    /// The value at the current path is sensitive.
    fn hide(&mut self) {
        self.found.push(self.path.clone());
    }
}

/// The schema a local `$ref` (`#`, `#/$defs/...`, `#/definitions/...`) points at.
fn resolve<'s>(root: &'s Value, reference: &str) -> Option<&'s Value> {
    let pointer = reference.strip_prefix('#')?;
    let decoded = percent_decode(pointer);
    root.pointer(&decoded)
}

/// `%xx` escapes in a `$ref`'s fragment (JSON pointers in URIs may carry them).
fn percent_decode(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_follow_refs_options_and_maps_once_per_recursion() {
        let schema = json!({
            "type": "object",
            "properties": {
                "login": {"$ref": "#/$defs/Login"},
                "backup": {"anyOf": [{"$ref": "#/$defs/Login"}, {"type": "null"}]},
                "vault": {"type": "object", "additionalProperties": {"type": "string", "writeOnly": true}},
                "tree": {"$ref": "#/$defs/Node"}
            },
            "$defs": {
                "Login": {"type": "object", "properties": {"password": {"type": "string", "writeOnly": true}}},
                "Node": {"type": "object", "properties": {
                    "secret": {"type": "string", "writeOnly": true},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
            }
        });
        let paths = SensitivePaths::of_schema(&schema);
        let mut value = json!({
            "login": {"password": "a"},
            "backup": null,
            "vault": {"k1": "b", "k2": "c"},
            "tree": {"secret": "d", "children": [{"secret": "e", "children": []}]}
        });
        assert!(paths.occurs_in(&value));
        assert!(paths.redact(&mut value));
        let text = value.to_string();
        for secret in ["\"a\"", "\"b\"", "\"c\"", "\"d\"", "\"e\""] {
            assert!(!text.contains(secret), "{secret} left in {text}");
        }
        // Recursive types are followed as deep as the value goes.
        assert_eq!(value["tree"]["children"][0]["secret"], REDACTED);
        assert_eq!(value["backup"], Value::Null);
        assert!(!paths.redact(&mut value), "redacting twice changes nothing");
    }

    #[test]
    fn tuples_unknown_refs_and_wrong_shapes_fail_closed() {
        let schema = json!({
            "type": "object",
            "properties": {
                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "string", "writeOnly": true}]},
                "creds": {"type": "object", "writeOnly": true, "properties": {"pw": {"type": "string"}}},
                "remote": {"$ref": "https://example.com/schema#/Thing"}
            }
        });
        let paths = SensitivePaths::of_schema(&schema);
        let mut value = json!({"pair": ["a", "s3cret"], "creds": "hunter2", "remote": {"x": 1}});
        assert_eq!(paths.pointers_in(&value), ["/creds", "/pair/1", "/remote"]);
        paths.redact(&mut value);
        assert_eq!(
            value,
            json!({"pair": ["a", REDACTED], "creds": REDACTED, "remote": REDACTED})
        );
        let texts = paths.texts_in(&json!({"creds": {"pw": "hunter2-nested"}}));
        assert!(texts.contains(&"hunter2-nested".to_owned()), "{texts:?}");
        assert!(is_within("/creds/pw", &["/creds".to_owned()]));
        assert!(!is_within("/credsx", &["/creds".to_owned()]));
    }

    #[test]
    fn nothing_sensitive_is_free() {
        let paths = SensitivePaths::of_schema(&json!({"type": "object", "properties": {"a": {}}}));
        assert!(paths.is_empty());
        let value = json!({"a": 1});
        assert!(matches!(paths.redacted(&value), Cow::Borrowed(_)));
    }

    #[test]
    fn the_wrapper_marks_its_schema_and_redacts_only_when_asked() {
        #[derive(Serialize, Deserialize, JsonSchema)]
        struct Out {
            id: u32,
            token: Sensitive<String>,
            pins: Vec<Sensitive<u16>>,
        }
        let input = crate::schema::schema_of::<Out>(false).to_value();
        assert_eq!(input["properties"]["token"]["writeOnly"], true);
        assert_eq!(input["properties"]["pins"]["items"]["writeOnly"], true);
        let output = crate::schema::output_schema_of::<Out>(false).to_value();
        assert_eq!(output["properties"]["token"]["const"], REDACTED);

        let out = Out {
            id: 1,
            token: "t0k3n".to_owned().into(),
            pins: vec![Sensitive::new(4711)],
        };
        assert_eq!(serde_json::to_value(&out).unwrap()["token"], "t0k3n");
        let kept = redacting(|| serde_json::to_value(&out).unwrap());
        assert_eq!(
            kept,
            json!({"id": 1, "token": REDACTED, "pins": [REDACTED]})
        );
        assert_eq!(serde_json::to_value(&out).unwrap()["pins"][0], 4711);
    }

    #[test]
    fn marking_a_top_level_property() {
        let mut schema = json!({"type": "object", "properties": {"pin": {"type": "string"}}});
        mark_properties(&mut schema, &["pin", "absent"]);
        assert_eq!(schema["properties"]["pin"]["writeOnly"], true);
        assert!(!SensitivePaths::of_schema(&schema).is_empty());
    }
}
