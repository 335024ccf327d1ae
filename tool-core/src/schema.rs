//! JSON Schema: generation through schemars, the model-facing form, defaults and validation.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

use crate::error::{InputError, InputProblem};

/// Most problems reported for one input; the rest are summarised.
const MAX_PROBLEMS: usize = 20;

/// The JSON Schema (2020-12) of `T`; with `inline`, subschemas are inlined instead of `$ref`ed
/// (recursive types still need a `$ref`).
pub fn schema_of<T: JsonSchema + ?Sized>(inline: bool) -> Schema {
    SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = inline)
        .into_generator()
        .into_root_schema_for::<T>()
}

/// The JSON Schema (2020-12) of an output type `T`, for what `T` serializes to.
///
/// Output is checked after serialization, so its schema must follow serde's serialize side:
/// a field with `skip_serializing_if` may be absent even when deserializing would require it,
/// and `rename(serialize = "...")` names the field that is actually written. [`schema_of`]
/// describes what deserializes, which is right for arguments and wrong for outputs.
pub fn output_schema_of<T: JsonSchema + ?Sized>(inline: bool) -> Schema {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|settings| settings.inline_subschemas = inline)
        .into_generator()
        .into_root_schema_for::<T>()
}

/// The model-facing form of a generated schema: without `$schema` and the root `title` (the Rust
/// type name, noise to a model); `$defs`/`$ref` kept.
pub fn model_facing(schema: &Schema) -> Value {
    let mut value = schema.as_value().clone();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
    }
    value
}

/// Whether `schema` describes a JSON object at its root.
pub fn is_object_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        _ => false,
    }
}

/// Whether `schema` still has a `$ref` anywhere.
pub fn has_ref(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.contains_key("$ref") || map.values().any(has_ref),
        Value::Array(items) => items.iter().any(has_ref),
        _ => false,
    }
}

/// The property a `serve` tool's schema gains: the task to continue.
pub fn task_id_property() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "The id of a running task of this tool to send this call to (from an earlier receipt). Leave it out to start a new task."
    })
}

/// `schema` with an optional `task_id` string property added.
pub fn with_task_id(mut schema: Value) -> Value {
    if let Some(map) = schema.as_object_mut() {
        let properties = map
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(properties) = properties.as_object_mut() {
            properties.insert("task_id".into(), task_id_property());
        }
    }
    schema
}

/// A compiled validator for one tool's input, plus what defaulting needs.
pub struct InputValidator {
    validator: jsonschema::Validator,
    schema: Value,
}

impl std::fmt::Debug for InputValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputValidator").finish_non_exhaustive()
    }
}

impl InputValidator {
    /// Compiles `schema` (JSON Schema 2020-12; `format` is an annotation, not an assertion).
    /// External `$ref`s are never fetched: a schema that needs one does not compile.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(false)
            .build(schema)
            .map_err(|error| {
                // The error is about the schema itself, so its instance path points into the
                // schema: say where, the message alone ("... is not a \"regex\"") does not.
                let at = error.instance_path().to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{error} at {at}")
                }
            })?;
        Ok(InputValidator {
            validator,
            schema: schema.clone(),
        })
    }

    /// Validates `input` and applies the schema's defaults to absent fields. `null` counts as an
    /// empty object (models send it for tools without arguments).
    pub fn validate(&self, tool: &str, input: Value) -> Result<Value, InputError> {
        let mut input = match input {
            Value::Null => Value::Object(Map::new()),
            other => other,
        };
        self.check(tool, &input)?;
        apply_defaults(&self.schema, &self.schema, &mut input, 0);
        Ok(input)
    }

    /// Checks `value` without changing it.
    pub fn check(&self, tool: &str, value: &Value) -> Result<(), InputError> {
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let mut problems: Vec<InputProblem> = Vec::new();
        let mut extra = 0usize;
        for error in self.validator.iter_errors(value) {
            if problems.len() == MAX_PROBLEMS {
                extra += 1;
                continue;
            }
            problems.push(InputProblem {
                pointer: error.instance_path().to_string(),
                message: error.to_string(),
            });
        }
        if extra > 0 {
            problems.push(InputProblem {
                pointer: String::new(),
                message: format!("{extra} more problems not listed"),
            });
        }
        Err(InputError {
            tool: tool.to_owned(),
            problems,
        })
    }
}

/// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`) within `root`.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut current = schema;
    for _ in 0..16 {
        let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
            return current;
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return current;
        };
        match root.pointer(pointer) {
            Some(target) => current = target,
            None => return current,
        }
    }
    current
}

/// Fills absent properties that have a `default` in `schema`, recursively through present
/// objects, arrays, `allOf`, and the one `anyOf`/`oneOf` branch that can hold the value.
fn apply_defaults(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let schema = resolve(root, schema);
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for part in all {
            apply_defaults(root, part, value, depth + 1);
        }
    }
    // `Option<Struct>` is `anyOf: [{$ref}, {type: null}]` and a tagged enum is `oneOf` objects
    // told apart by a `const` tag: the defaults of the one branch that can hold the value
    // apply. With several candidates (untagged enums) which one matched is unknown, and
    // defaults of the wrong one would add fields, so none apply.
    for keyword in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
            let mut candidates = branches
                .iter()
                .filter(|branch| may_hold(root, resolve(root, branch), value));
            if let (Some(only), None) = (candidates.next(), candidates.next()) {
                apply_defaults(root, only, value, depth + 1);
            }
        }
    }
    match value {
        Value::Object(object) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (key, property) in properties {
                match object.get_mut(key) {
                    Some(present) => apply_defaults(root, property, present, depth + 1),
                    None => {
                        // A `default` beside a `$ref` belongs to the property, so look there first.
                        let default = property
                            .get("default")
                            .or_else(|| resolve(root, property).get("default"));
                        if let Some(default) = default {
                            object.insert(key.clone(), default.clone());
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    apply_defaults(root, item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Whether `schema` may hold `value`, judged by `type`, `const` and `enum`, and for objects by
/// required properties and `const` properties (enum tags); a schema that says none of that may
/// hold anything.
fn may_hold(root: &Value, schema: &Value, value: &Value) -> bool {
    if let (Value::Object(object), Some(properties)) =
        (value, schema.get("properties").and_then(Value::as_object))
    {
        let missing_required = schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .any(|k| !object.contains_key(k))
            });
        let tag_differs = properties.iter().any(|(key, property)| {
            match (resolve(root, property).get("const"), object.get(key)) {
                (Some(tag), Some(given)) => tag != given,
                _ => false,
            }
        });
        if missing_required || tag_differs {
            return false;
        }
    }
    let kind = json_type(value);
    let admits = |t: &str| t == kind || (t == "number" && kind == "integer");
    if let Some(constant) = schema.get("const") {
        return json_type(constant) == kind;
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values.iter().any(|v| json_type(v) == kind);
    }
    match schema.get("type") {
        Some(Value::String(t)) => admits(t),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).any(admits),
        _ => true,
    }
}

/// The JSON Schema type name of `value` (`integer` for whole numbers).
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validator() -> InputValidator {
        InputValidator::compile(&json!({
            "type": "object",
            "properties": {
                "service": { "type": "string", "minLength": 1 },
                "window": { "$ref": "#/$defs/Window", "default": "1h" },
                "limit": { "type": "integer", "minimum": 1, "maximum": 200, "default": 50 },
                "when": { "type": "string", "format": "date-time" },
                "nested": { "$ref": "#/$defs/Nested" }
            },
            "required": ["service"],
            "$defs": {
                "Window": { "enum": ["5m", "1h", "24h"] },
                "Nested": { "type": "object", "properties": { "depth": { "type": "integer", "default": 3 } } }
            }
        }))
        .unwrap()
    }

    #[test]
    fn defaults_are_applied_and_optional_fields_stay_optional() {
        let out = validator()
            .validate("read_logs", json!({ "service": "api", "nested": {} }))
            .unwrap();
        assert_eq!(
            out,
            json!({ "service": "api", "window": "1h", "limit": 50, "nested": { "depth": 3 } })
        );
    }

    #[test]
    fn every_failing_pointer_is_listed() {
        let err = validator()
            .validate(
                "read_logs",
                json!({ "service": "", "limit": 500, "window": "2d" }),
            )
            .unwrap_err();
        let pointers: Vec<&str> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
        assert!(pointers.contains(&"/service"), "{pointers:?}");
        assert!(pointers.contains(&"/limit"), "{pointers:?}");
        assert!(pointers.contains(&"/window"), "{pointers:?}");
        let text = err.to_string();
        assert!(text.contains("invalid input for `read_logs`"), "{text}");
        assert!(
            text.contains("/limit: 500 is greater than the maximum of 200"),
            "{text}"
        );
    }

    #[test]
    fn defaults_apply_through_the_one_branch_that_fits() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": {
                "option": { "anyOf": [{ "$ref": "#/$defs/Nested" }, { "type": "null" }] },
                "tagged": { "oneOf": [
                    { "type": "object", "properties": { "kind": { "const": "a" }, "x": { "default": 1 } }, "required": ["kind"] },
                    { "type": "object", "properties": { "kind": { "const": "b" }, "y": { "default": 2 } }, "required": ["kind"] }
                ] },
                "untagged": { "anyOf": [
                    { "type": "object", "properties": { "x": { "default": 1 } } },
                    { "type": "object", "properties": { "y": { "default": 2 } } }
                ] }
            },
            "$defs": {
                "Nested": { "type": "object", "properties": { "depth": { "type": "integer", "default": 3 } } }
            }
        }))
        .unwrap();
        let out = validator
            .validate(
                "t",
                json!({ "option": {}, "tagged": { "kind": "b" }, "untagged": {} }),
            )
            .unwrap();
        assert_eq!(
            out,
            json!({ "option": { "depth": 3 }, "tagged": { "kind": "b", "y": 2 }, "untagged": {} })
        );
        let out = validator.validate("t", json!({ "option": null })).unwrap();
        assert_eq!(out, json!({ "option": null }));
    }

    #[test]
    fn output_schemas_follow_what_serializes() {
        #[derive(serde::Serialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Out {
            ok: bool,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            warnings: Vec<String>,
        }
        assert_eq!(
            schema_of::<Out>(false).as_value()["required"],
            json!(["ok", "warnings"])
        );
        assert_eq!(
            output_schema_of::<Out>(false).as_value()["required"],
            json!(["ok"])
        );
    }

    #[test]
    fn format_is_an_annotation() {
        validator()
            .validate("t", json!({ "service": "a", "when": "not a date" }))
            .unwrap();
    }

    #[test]
    fn null_is_an_empty_object() {
        let err = validator().validate("t", Value::Null).unwrap_err();
        assert_eq!(err.problems[0].pointer, "");
        assert!(err.problems[0].message.contains("service"));
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let err = InputValidator::compile(&json!({ "$ref": "https://example.com/schema.json" }))
            .unwrap_err();
        assert!(!err.is_empty());
    }
}
