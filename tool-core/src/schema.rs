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
            .map_err(|error| error.to_string())?;
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
/// objects, arrays and `allOf`.
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
            .validate("read_logs", json!({ "service": "", "limit": 500, "window": "2d" }))
            .unwrap_err();
        let pointers: Vec<&str> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
        assert!(pointers.contains(&"/service"), "{pointers:?}");
        assert!(pointers.contains(&"/limit"), "{pointers:?}");
        assert!(pointers.contains(&"/window"), "{pointers:?}");
        let text = err.to_string();
        assert!(text.contains("invalid input for `read_logs`"), "{text}");
        assert!(text.contains("/limit: 500 is greater than the maximum of 200"), "{text}");
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
