//! JSON Schema: generation through schemars, the model-facing form, defaults and validation.

use std::fmt::Write as _;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

use crate::error::{InputError, InputProblem};
use crate::sensitive::{SensitivePaths, is_within, scrub};

mod fan;
mod plan;

use fan::Fan;
use plan::Plan;

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
    // What the schema asks beyond the validator (numbers that must fit their Rust type,
    // defaults), worked out once; with whether there is any of each, so that most calls skip
    // those walks.
    plan: Plan,
    numbers: bool,
    defaults: bool,
    // How much listing the validator's errors can cost, for schemas where it can explode.
    fan: Fan,
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
        Ok(InputValidator::new(
            validator,
            schema,
            jsonschema::Draft::Draft202012,
        ))
    }

    fn new(validator: jsonschema::Validator, schema: &Value, draft: jsonschema::Draft) -> Self {
        let plan = Plan::compile(schema, draft);
        InputValidator {
            numbers: plan.has_numbers(),
            defaults: plan.has_defaults(),
            validator,
            plan,
            fan: Fan::compile(schema),
        }
    }

    /// Compiles a schema written elsewhere (a remote server's): in the dialect its `$schema`
    /// names (draft 4 to 2020-12), 2020-12 when it names none, as MCP specifies. A `$schema`
    /// this crate does not know is refused rather than guessed.
    pub fn compile_dialect(schema: &Value) -> Result<Self, String> {
        let draft = match schema.get("$schema").and_then(Value::as_str) {
            None => jsonschema::Draft::Draft202012,
            Some(uri) => {
                let uri = uri.trim_end_matches('#');
                let uri = uri
                    .strip_prefix("https://")
                    .or_else(|| uri.strip_prefix("http://"))
                    .unwrap_or(uri);
                match uri {
                    "json-schema.org/draft-04/schema" => jsonschema::Draft::Draft4,
                    "json-schema.org/draft-06/schema" => jsonschema::Draft::Draft6,
                    "json-schema.org/draft-07/schema" => jsonschema::Draft::Draft7,
                    "json-schema.org/draft/2019-09/schema" => jsonschema::Draft::Draft201909,
                    "json-schema.org/draft/2020-12/schema" => jsonschema::Draft::Draft202012,
                    other => {
                        return Err(format!(
                            "unknown JSON Schema dialect `{other}` in `$schema`"
                        ));
                    }
                }
            }
        };
        let mut schema = schema.clone();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
        }
        let validator = jsonschema::options()
            .with_draft(draft)
            .should_validate_formats(false)
            .build(&schema)
            .map_err(|error| error.to_string())?;
        Ok(InputValidator::new(validator, &schema, draft))
    }

    /// Validates `input` and applies the schema's defaults to absent fields. `null` counts as an
    /// empty object (models send it for tools without arguments).
    pub fn validate(&self, tool: &str, input: Value) -> Result<Value, InputError> {
        self.validate_hiding(tool, input, &SensitivePaths::default())
    }

    /// [`InputValidator::validate`], with problems at the places `sensitive` marks reported
    /// without quoting the value, and its values taken out of every other message.
    pub fn validate_hiding(
        &self,
        tool: &str,
        input: Value,
        sensitive: &SensitivePaths,
    ) -> Result<Value, InputError> {
        let mut input = match input {
            Value::Null => Value::Object(Map::new()),
            other => other,
        };
        self.check_hiding(tool, &input, sensitive)?;
        if self.defaults {
            self.plan.apply_defaults(&mut input);
        }
        Ok(input)
    }

    /// Checks `value` without changing it: the schema, then that every number fits the Rust
    /// type its `format` names exactly (so what was validated is what the tool receives).
    pub fn check(&self, tool: &str, value: &Value) -> Result<(), InputError> {
        self.check_hiding(tool, value, &SensitivePaths::default())
    }

    /// [`InputValidator::check`] for a value with sensitive places (see
    /// [`InputValidator::validate_hiding`]).
    pub fn check_hiding(
        &self,
        tool: &str,
        value: &Value,
        sensitive: &SensitivePaths,
    ) -> Result<(), InputError> {
        // Valid input (most calls) is only checked; the problems, their pointers and messages
        // are worked out when there is one.
        let numbers_fit = || !self.numbers || self.plan.numbers_fit(value);
        if self.validator.is_valid(value) && numbers_fit() {
            return Ok(());
        }
        self.problems(tool, value, sensitive)
    }

    /// Every problem of `value`, for [`InputValidator::check_hiding`] once it found one.
    #[cold]
    fn problems(
        &self,
        tool: &str,
        value: &Value,
        sensitive: &SensitivePaths,
    ) -> Result<(), InputError> {
        let hidden = Hidden::of(sensitive, value);
        let mut problems: Vec<InputProblem> = Vec::new();
        let mut extra = 0usize;
        // Every error, unless listing them could take longer than anyone waits (see `fan`):
        // then the first.
        let listed = self.fan.within(value);
        let (all, first) = if listed {
            (Some(self.validator.iter_errors(value)), None)
        } else {
            (None, self.validator.validate(value).err())
        };
        for error in all.into_iter().flatten().chain(first) {
            if problems.len() == MAX_PROBLEMS {
                extra += 1;
                continue;
            }
            // A missing field is reported at the field, not at the object that lacks it.
            let path = error.instance_path().as_str();
            let missing = match error.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => property.as_str(),
                _ => None,
            };
            let mut pointer =
                String::with_capacity(path.len() + missing.map_or(0, |name| name.len() + 1));
            pointer.push_str(path);
            if let Some(name) = missing {
                push_segment(&mut pointer, name);
            }
            // Written once, into a buffer that usually fits it.
            let mut message = String::with_capacity(64);
            let _ = write!(message, "{error}");
            let message = hidden.message(&pointer, error.kind().keyword(), message);
            problems.push(InputProblem { pointer, message });
        }
        // Every failing pointer in one answer: numbers that do not fit their type too, unless
        // the schema already flagged that place.
        // The quick walk first: the detailed one builds pointers as it goes.
        let numbers = if self.numbers && !self.plan.numbers_fit(value) {
            self.plan.number_problems(value)
        } else {
            Vec::new()
        };
        for mut problem in numbers {
            problem.message = hidden.message(&problem.pointer, "format", problem.message);
            if problems.len() == MAX_PROBLEMS {
                extra += 1;
            } else if !problems.iter().any(|p| p.pointer == problem.pointer) {
                problems.push(problem);
            }
        }
        if problems.is_empty() && extra == 0 {
            return Ok(());
        }
        if !listed {
            problems.push(InputProblem {
                pointer: String::new(),
                message: format!(
                    "only the first problem the schema finds is listed: this tool's schema reaches the input by too many paths to list them all (over {} checks)",
                    fan::BUDGET
                ),
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

/// `pointer` with `key` appended as one more JSON Pointer segment (`~` and `/` escaped).
fn push_segment(pointer: &mut String, key: &str) {
    pointer.push('/');
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// What a problem's message must not quote: the sensitive places of the value checked (JSON
/// pointers) and their texts.
struct Hidden {
    places: Vec<String>,
    texts: Vec<String>,
}

impl Hidden {
    fn of(sensitive: &SensitivePaths, value: &Value) -> Hidden {
        if sensitive.is_empty() {
            return Hidden {
                places: Vec::new(),
                texts: Vec::new(),
            };
        }
        Hidden {
            places: sensitive.pointers_in(value),
            texts: sensitive.texts_in(value),
        }
    }

    /// The message for a problem at `pointer` with `keyword`: without the value when the
    /// place is sensitive; otherwise `message` with sensitive texts taken out (before it is
    /// shortened, so a long secret is never cut into a prefix that no longer matches).
    fn message(&self, pointer: &str, keyword: &str, message: String) -> String {
        if self.places.is_empty() {
            return shorten(message);
        }
        if is_within(pointer, &self.places) {
            return format!(
                "the value does not satisfy `{keyword}` (it is sensitive, so it is not quoted)"
            );
        }
        shorten(scrub(&message, &self.texts))
    }
}

/// A problem's message, bounded: the validator's messages quote the failing value, which can be
/// of any size.
fn shorten(message: String) -> String {
    if let std::borrow::Cow::Owned(short) = crate::error::quoted_prefix(&message) {
        return short;
    }
    message
}

/// Closes every object that names its properties (`additionalProperties: false` where the
/// schema says nothing), so a field the tool does not have is an error the model sees, not a
/// silently dropped argument. Maps (`additionalProperties` given) and objects assembled with
/// `allOf` are left open.
pub fn close_objects(schema: &mut Value) {
    close(schema, 0);
}

fn close(node: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let Value::Object(map) = node else { return };
    let named = map.contains_key("properties");
    let open_by_design = [
        "additionalProperties",
        "allOf",
        "patternProperties",
        "unevaluatedProperties",
    ]
    .iter()
    .any(|k| map.contains_key(*k));
    if named && !open_by_design {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                if let Value::Object(children) = child {
                    for grandchild in children.values_mut() {
                        close(grandchild, depth + 1);
                    }
                }
            }
            "items" | "additionalProperties" => close(child, depth + 1),
            "anyOf" | "oneOf" | "prefixItems" => {
                if let Value::Array(branches) = child {
                    for branch in branches {
                        close(branch, depth + 1);
                    }
                }
            }
            _ => {}
        }
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
    fn numbers_that_misfit_their_format_fail_an_otherwise_valid_input() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": {
                "n": { "type": "integer", "format": "uint8" },
                "m": { "type": "object", "additionalProperties": { "type": "number", "format": "float" } }
            }
        }))
        .unwrap();
        let err = validator.validate("t", json!({ "n": 300 })).unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert_eq!(err.problems[0].pointer, "/n");
        assert!(err.problems[0].message.contains("8-bit"), "{err}");
        let err = validator
            .validate("t", json!({ "m": { "a/b": 0.1 } }))
            .unwrap_err();
        assert_eq!(err.problems[0].pointer, "/m/a~1b");
        let out = validator
            .validate("t", json!({ "n": 255, "m": { "x": 0.5 } }))
            .unwrap();
        assert_eq!(out, json!({ "n": 255, "m": { "x": 0.5 } }));
    }

    #[test]
    fn recursive_refs_are_walked_for_numbers_and_defaults() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": { "root": { "$ref": "#/$defs/Node" } },
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "size": { "type": "integer", "format": "uint8", "default": 1 },
                        "children": { "type": "array", "items": { "$ref": "#/$defs/Node" } }
                    }
                }
            }
        }))
        .unwrap();
        let out = validator
            .validate(
                "t",
                json!({ "root": { "children": [{ "children": [{}] }, { "size": 9 }] } }),
            )
            .unwrap();
        assert_eq!(
            out,
            json!({ "root": { "size": 1, "children": [
                { "size": 1, "children": [{ "size": 1 }] },
                { "size": 9 }
            ] } })
        );
        let err = validator
            .validate(
                "t",
                json!({ "root": { "children": [{ "children": [{ "size": 256 }] }] } }),
            )
            .unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert_eq!(err.problems[0].pointer, "/root/children/0/children/0/size");
        assert!(err.problems[0].message.contains("8-bit"), "{err}");
    }

    #[test]
    fn a_value_deeper_than_the_walks_go_is_left_as_it_is() {
        let validator = InputValidator::compile(&json!({
            "$ref": "#/$defs/Chain",
            "$defs": {
                "Chain": {
                    "type": "object",
                    "properties": {
                        "next": { "$ref": "#/$defs/Chain" },
                        "n": { "type": "integer", "format": "uint8", "default": 0 }
                    }
                }
            }
        }))
        .unwrap();
        let mut input = json!({});
        for _ in 0..100 {
            input = json!({ "next": input });
        }
        let out = validator.validate("t", input).unwrap();
        // Defaults are filled down to the walks' depth bound and no further.
        let mut at = &out;
        let mut filled = 0;
        while let Some(next) = at.get("next") {
            if at.get("n").is_some() {
                filled += 1;
            }
            at = next;
        }
        assert_eq!(filled, 65);
    }

    #[test]
    fn defaults_come_from_beside_the_ref_first_then_from_its_target() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": {
                "beside": { "$ref": "#/$defs/Level", "default": "warn" },
                "target": { "$ref": "#/$defs/Level" },
                "escaped": { "$ref": "#/$defs/a~1b~0c" },
                "parts": { "allOf": [{ "$ref": "#/$defs/Part" }] }
            },
            "$defs": {
                "Level": { "enum": ["error", "warn"], "default": "error" },
                "a/b~c": { "type": "integer", "format": "int8", "default": -1 },
                "Part": { "type": "object", "properties": { "p": { "default": true } } }
            }
        }))
        .unwrap();
        let out = validator.validate("t", json!({ "parts": {} })).unwrap();
        assert_eq!(
            out,
            json!({ "beside": "warn", "target": "error", "escaped": -1, "parts": { "p": true } })
        );
        let err = validator
            .validate("t", json!({ "escaped": 128 }))
            .unwrap_err();
        assert_eq!(err.problems[0].pointer, "/escaped");
    }

    #[test]
    fn keys_with_slashes_and_tildes_are_named_and_filled() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": {
                "a/b": { "type": "integer", "format": "uint8", "default": 7 },
                "c~d": { "type": "array", "items": { "type": "number", "format": "float" } },
                "~/": { "type": "object", "additionalProperties": { "type": "integer", "format": "int16" } }
            }
        }))
        .unwrap();
        assert_eq!(
            validator.validate("t", json!({})).unwrap(),
            json!({ "a/b": 7 })
        );
        let err = validator
            .validate(
                "t",
                json!({ "a/b": 256, "c~d": [0.5, 0.1], "~/": { "x/y": 40000, "ok": 1 } }),
            )
            .unwrap_err();
        let pointers: Vec<&str> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers, ["/a~1b", "/c~0d/1", "/~0~1/x~1y"], "{err}");
    }

    #[test]
    fn numbers_are_checked_in_the_one_branch_that_can_hold_them() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": {
                "small": { "anyOf": [{ "$ref": "#/$defs/Small" }, { "type": "null" }] },
                "either": { "anyOf": [
                    { "type": "integer", "format": "uint8" },
                    { "type": "integer", "format": "int64" }
                ] }
            },
            "$defs": { "Small": { "type": "integer", "format": "uint8" } }
        }))
        .unwrap();
        let err = validator
            .validate("t", json!({ "small": 300 }))
            .unwrap_err();
        assert_eq!(err.problems[0].pointer, "/small");
        validator.validate("t", json!({ "small": null })).unwrap();
        // Two branches may hold a whole number: which one is meant is unknown, so neither
        // format is imposed.
        validator.validate("t", json!({ "either": 300 })).unwrap();
    }

    #[test]
    fn numbers_under_pattern_properties_are_checked_against_their_format() {
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "properties": { "n_fixed": { "type": "integer", "format": "int8" } },
            "patternProperties": {
                "^n_": { "type": "integer", "format": "uint8" },
                "^q_": { "type": "array", "items": { "type": "number", "format": "float" } }
            },
            "additionalProperties": { "type": "integer", "format": "int8" }
        }))
        .unwrap();
        let err = validator
            .validate("t", json!({ "n_a": 300, "q_b": [0.5, 0.1], "z": 200 }))
            .unwrap_err();
        let pointers: Vec<&str> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers, ["/n_a", "/q_b/1", "/z"], "{err}");
        assert!(err.problems[0].message.contains("8-bit unsigned"), "{err}");
        // A key a pattern matches is not an additional one: 200 fits `uint8`, not `int8`.
        let out = validator
            .validate("t", json!({ "n_b": 200, "q_c": [0.5], "z": -1 }))
            .unwrap();
        assert_eq!(out, json!({ "n_b": 200, "q_c": [0.5], "z": -1 }));
        // A named property that a pattern matches too meets both formats.
        for misfit in [200, -1] {
            let err = validator
                .validate("t", json!({ "n_fixed": misfit }))
                .unwrap_err();
            assert_eq!(err.problems.len(), 1, "{err}");
            assert_eq!(err.problems[0].pointer, "/n_fixed");
        }
        validator.validate("t", json!({ "n_fixed": 100 })).unwrap();
    }

    #[test]
    fn pattern_properties_match_keys_in_the_validators_dialect() {
        // ECMA 262 `\d` and an unanchored pattern, as jsonschema matches them.
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "patternProperties": { "\\d": { "type": "integer", "format": "uint8" } }
        }))
        .unwrap();
        let err = validator
            .validate("t", json!({ "a1b": 256, "ab": 256 }))
            .unwrap_err();
        let pointers: Vec<&str> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers, ["/a1b"], "{err}");
    }

    #[test]
    fn a_schema_whose_paths_multiply_lists_the_first_error_only() {
        // jsonschema's error listing follows each of the 3^depth paths to the deepest value:
        // at depth 40, past any wait. Its first error stays cheap.
        let validator = InputValidator::compile(&json!({
            "type": "object",
            "allOf": [{ "$ref": "#/$defs/B" }, { "$ref": "#/$defs/C" }],
            "properties": { "x": { "$ref": "#" }, "n": { "type": "integer" } },
            "$defs": {
                "B": { "type": "object", "properties": { "x": { "$ref": "#" } } },
                "C": { "type": "object", "properties": { "x": { "$ref": "#" } } }
            }
        }))
        .unwrap();
        let deep = (0..40).fold(json!({ "n": "one" }), |value, _| json!({ "x": value }));
        let err = validator.validate("t", deep).unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
        assert_eq!(err.problems[0].pointer, format!("{}/n", "/x".repeat(40)));
        assert!(
            err.problems[1].message.contains("only the first problem"),
            "{err}"
        );
        // Shallow values are listed in full.
        let err = validator
            .validate("t", json!({ "x": { "n": "one" }, "n": "two" }))
            .unwrap_err();
        assert!(
            err.problems
                .iter()
                .all(|p| !p.message.contains("only the first")),
            "{err}"
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
        assert_eq!(err.problems[0].pointer, "/service");
        assert!(err.problems[0].message.contains("service"));
    }

    #[test]
    fn remote_refs_are_never_fetched() {
        let err = InputValidator::compile(&json!({ "$ref": "https://example.com/schema.json" }))
            .unwrap_err();
        assert!(!err.is_empty());
    }
}
