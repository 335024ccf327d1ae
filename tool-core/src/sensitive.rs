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

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// What stands in for a sensitive value wherever it is not kept.
pub const REDACTED: &str = "[redacted]";

/// How deep [`SensitivePaths::of_schema`] follows a schema (recursive types stop here).
const MAX_DEPTH: usize = 32;

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

/// One step of a path into a JSON value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    /// The property of that name.
    Key(String),
    /// Every element of an array.
    Items,
    /// Every property value of an object (a map's values).
    Values,
}

/// Where a schema's sensitive values are in a value it describes: the paths to every
/// subschema marked `"writeOnly": true`, through properties, array items, map values,
/// `anyOf`/`oneOf`/`allOf` branches and `$ref`s into `$defs`. Computed once per tool.
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SensitivePaths {
    paths: Vec<Vec<Step>>,
}

impl SensitivePaths {
    /// The sensitive places of values that `schema` describes.
    pub fn of_schema(schema: &Value) -> SensitivePaths {
        let mut walk = Walk {
            root: schema,
            refs: Vec::new(),
            path: Vec::new(),
            found: Vec::new(),
        };
        walk.node(schema, 0);
        let mut paths = walk.found;
        paths.sort_by_key(Vec::len);
        paths.dedup();
        SensitivePaths { paths }
    }

    /// Whether nothing is sensitive (most tools): every operation is then free.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
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
        if self.is_empty() || !self.occurs_in(value) {
            return Cow::Borrowed(value);
        }
        let mut copy = value.clone();
        self.redact(&mut copy);
        Cow::Owned(copy)
    }

    /// Whether `value` holds a value at a sensitive place (`null` counts as absent).
    pub fn occurs_in(&self, value: &Value) -> bool {
        self.paths.iter().any(|path| occurs(value, path))
    }

    /// Calls `visit` on every value at a sensitive place in `value` (`null`s skipped): what
    /// sealing and unsealing go through.
    pub fn for_each(&self, value: &mut Value, visit: &mut dyn FnMut(&mut Value)) {
        for path in &self.paths {
            visit_path(value, path, visit);
        }
    }
}

impl SensitivePaths {
    /// The sensitive values in `value` as a message may quote them: strings as they are and as
    /// JSON, other values as JSON. Texts under two characters are left out: they reveal next to
    /// nothing, and replacing them would garble every message.
    pub fn texts_in(&self, value: &Value) -> Vec<String> {
        let mut texts = Vec::new();
        if self.is_empty() || !self.occurs_in(value) {
            return texts;
        }
        let mut copy = value.clone();
        self.for_each(&mut copy, &mut |leaf| {
            if leaf.as_str() == Some(REDACTED) {
                return;
            }
            if let Value::String(text) = leaf {
                texts.push(text.clone());
            }
            texts.push(leaf.to_string());
        });
        texts.retain(|text| text.chars().nth(1).is_some());
        // Longest first, so a value is replaced whole before any part of it.
        texts.sort_by_key(|text| std::cmp::Reverse(text.len()));
        texts.dedup();
        texts
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

fn occurs(value: &Value, path: &[Step]) -> bool {
    let Some((step, rest)) = path.split_first() else {
        return !value.is_null();
    };
    match (step, value) {
        (Step::Key(key), Value::Object(map)) => map.get(key).is_some_and(|v| occurs(v, rest)),
        (Step::Items, Value::Array(items)) => items.iter().any(|v| occurs(v, rest)),
        (Step::Values, Value::Object(map)) => map.values().any(|v| occurs(v, rest)),
        _ => false,
    }
}

fn visit_path(value: &mut Value, path: &[Step], visit: &mut dyn FnMut(&mut Value)) {
    let Some((step, rest)) = path.split_first() else {
        if !value.is_null() {
            visit(value);
        }
        return;
    };
    match (step, value) {
        (Step::Key(key), Value::Object(map)) => {
            if let Some(v) = map.get_mut(key) {
                visit_path(v, rest, visit);
            }
        }
        (Step::Items, Value::Array(items)) => {
            for v in items {
                visit_path(v, rest, visit);
            }
        }
        (Step::Values, Value::Object(map)) => {
            for v in map.values_mut() {
                visit_path(v, rest, visit);
            }
        }
        _ => {}
    }
}

/// The walk of [`SensitivePaths::of_schema`].
struct Walk<'s> {
    root: &'s Value,
    /// The `$ref`s being followed: a recursive type is followed once per path.
    refs: Vec<&'s str>,
    path: Vec<Step>,
    found: Vec<Vec<Step>>,
}

impl<'s> Walk<'s> {
    fn node(&mut self, schema: &'s Value, depth: usize) {
        let Value::Object(map) = schema else {
            return;
        };
        if depth > MAX_DEPTH {
            return;
        }
        if map.get("writeOnly") == Some(&Value::Bool(true)) {
            self.found.push(self.path.clone());
            return;
        }
        if let Some(Value::String(reference)) = map.get("$ref") {
            self.reference(reference, depth);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                for branch in branches {
                    self.node(branch, depth + 1);
                }
            }
        }
        for key in ["then", "else"] {
            if let Some(branch) = map.get(key) {
                self.node(branch, depth + 1);
            }
        }
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, property) in properties {
                self.step(Step::Key(name.clone()), property, depth);
            }
        }
        self.values(map, depth);
        if let Some(items) = map.get("items") {
            self.step(Step::Items, items, depth);
        }
        if let Some(Value::Array(items)) = map.get("prefixItems") {
            for item in items {
                self.step(Step::Items, item, depth);
            }
        }
    }

    /// A map's values: `additionalProperties` and `patternProperties`.
    fn values(&mut self, map: &'s Map<String, Value>, depth: usize) {
        if let Some(additional) = map.get("additionalProperties") {
            self.step(Step::Values, additional, depth);
        }
        if let Some(Value::Object(patterns)) = map.get("patternProperties") {
            for pattern in patterns.values() {
                self.step(Step::Values, pattern, depth);
            }
        }
    }

    fn step(&mut self, step: Step, schema: &'s Value, depth: usize) {
        self.path.push(step);
        self.node(schema, depth + 1);
        self.path.pop();
    }

    fn reference(&mut self, reference: &'s str, depth: usize) {
        if self.refs.contains(&reference) {
            return;
        }
        let Some(target) = reference
            .strip_prefix('#')
            .and_then(|pointer| self.root.pointer(pointer))
        else {
            return;
        };
        self.refs.push(reference);
        self.node(target, depth + 1);
        self.refs.pop();
    }
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
        for secret in ["\"a\"", "\"b\"", "\"c\"", "\"d\""] {
            assert!(!text.contains(secret), "{secret} left in {text}");
        }
        // The recursion is followed once: the grandchild's secret is beyond the paths.
        assert_eq!(value["tree"]["children"][0]["secret"], "e");
        assert_eq!(value["backup"], Value::Null);
        assert!(!paths.redact(&mut value), "redacting twice changes nothing");
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
