//! JSON Schema: generation through schemars, the model-facing form, defaults and validation.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::error::{InputError, InputProblem};
use crate::sensitive::{SensitivePaths, is_within, scrub};

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
    // What the schema asks beyond the validator, found once: whether any number has a `format`
    // naming a Rust type (else no number can misfit), and whether anything has a `default`
    // (else there is nothing to fill). Most calls then skip those walks.
    numbers: bool,
    defaults: bool,
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
        Ok(InputValidator::new(validator, schema.clone()))
    }

    fn new(validator: jsonschema::Validator, schema: Value) -> Self {
        InputValidator {
            numbers: mentions(&schema, 0, &|key, value| {
                key == "format" && value.as_str().is_some_and(|f| NUMBER_FORMATS.contains(&f))
            }),
            defaults: mentions(&schema, 0, &|key, _| key == "default"),
            validator,
            schema,
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
        Ok(InputValidator::new(validator, schema))
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
            apply_defaults(&self.schema, &self.schema, &mut input, 0);
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
        let numbers_fit = || !self.numbers || numbers_fit(&self.schema, value);
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
        for error in self.validator.iter_errors(value) {
            if problems.len() == MAX_PROBLEMS {
                extra += 1;
                continue;
            }
            // A missing field is reported at the field, not at the object that lacks it.
            let mut pointer = error.instance_path().to_string();
            if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind()
                && let Some(name) = property.as_str()
            {
                push_segment(&mut pointer, name);
            }
            let message = hidden.message(&pointer, error.kind().keyword(), error.to_string());
            problems.push(InputProblem { pointer, message });
        }
        // Every failing pointer in one answer: numbers that do not fit their type too, unless
        // the schema already flagged that place.
        let numbers = if self.numbers {
            number_problems(&self.schema, value)
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

/// The `format`s that name a Rust number type (schemars writes them), checked by
/// [`number_misfit`].
const NUMBER_FORMATS: [&str; 12] = [
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "int", "uint64", "uint",
    "float", "double",
];

/// Whether any object in `schema` has a key and value for which `hit` holds (or the schema
/// nests too deep to tell: then the walks run, as they would without this answer).
fn mentions(schema: &Value, depth: usize, hit: &dyn Fn(&str, &Value) -> bool) -> bool {
    if depth > 256 {
        return true;
    }
    match schema {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| hit(key, value) || mentions(value, depth + 1, hit)),
        Value::Array(items) => items.iter().any(|item| mentions(item, depth + 1, hit)),
        _ => false,
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

/// Numbers that do not fit, exactly, the Rust type their schema's `format` names (schemars
/// writes `uint32`, `int64`, `float`, `double`, ...). JSON Schema cannot say "fits a `u32`" or
/// "is exactly an `f32`", and serde would otherwise round or fail without a pointer.
fn number_problems(root: &Value, value: &Value) -> Vec<InputProblem> {
    let mut walk = NumberWalk {
        root,
        detailed: true,
        pointer: String::new(),
        problems: Vec::new(),
        misfit: false,
    };
    walk.visit(root, value, 0);
    walk.problems
}

/// Whether every number of `value` fits the type its `format` names: [`number_problems`]
/// without pointers or messages, stopping at the first misfit.
fn numbers_fit(root: &Value, value: &Value) -> bool {
    let mut walk = NumberWalk {
        root,
        detailed: false,
        pointer: String::new(),
        problems: Vec::new(),
        misfit: false,
    };
    walk.visit(root, value, 0);
    !walk.misfit
}

/// One walk of a value beside its schema, looking for numbers that misfit; `detailed` walks
/// note where and why, the others only whether.
struct NumberWalk<'a> {
    root: &'a Value,
    detailed: bool,
    pointer: String,
    problems: Vec<InputProblem>,
    misfit: bool,
}

impl NumberWalk<'_> {
    fn done(&self) -> bool {
        if self.detailed {
            self.problems.len() >= MAX_PROBLEMS
        } else {
            self.misfit
        }
    }

    /// Visits `value` below `key` (a property name or an array index).
    fn child(&mut self, key: Segment<'_>, schema: &Value, value: &Value, depth: usize) {
        let len = self.pointer.len();
        if self.detailed {
            match key {
                Segment::Key(key) => push_segment(&mut self.pointer, key),
                Segment::Index(i) => {
                    let _ = write!(self.pointer, "/{i}");
                }
            }
        }
        self.visit(schema, value, depth + 1);
        self.pointer.truncate(len);
    }

    fn visit(&mut self, schema: &Value, value: &Value, depth: usize) {
        if depth > 64 || self.done() {
            return;
        }
        let root = self.root;
        let schema = resolve(root, schema);
        match value {
            Value::Number(number) => {
                if let Some(format) = schema.get("format").and_then(Value::as_str)
                    && let Some(message) = number_misfit(number, format)
                {
                    self.misfit = true;
                    if self.detailed {
                        self.problems.push(InputProblem {
                            pointer: self.pointer.clone(),
                            message,
                        });
                    }
                }
            }
            Value::Object(object) => {
                let properties = schema.get("properties").and_then(Value::as_object);
                if let Some(properties) = properties {
                    for (key, child) in object {
                        if let Some(property) = properties.get(key) {
                            self.child(Segment::Key(key), property, child, depth);
                        }
                    }
                }
                if let Some(values) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                    for (key, child) in object {
                        if properties.is_none_or(|p| !p.contains_key(key)) {
                            self.child(Segment::Key(key), values, child, depth);
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                    for (i, item) in items.iter().enumerate() {
                        self.child(Segment::Index(i), item_schema, item, depth);
                    }
                }
            }
            _ => {}
        }
        if !matches!(value, Value::Number(_)) || schema.get("format").is_none() {
            for keyword in ["anyOf", "oneOf"] {
                if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
                    let mut candidates = branches
                        .iter()
                        .filter(|branch| may_hold(root, resolve(root, branch), value));
                    if let (Some(only), None) = (candidates.next(), candidates.next()) {
                        self.visit(only, value, depth + 1);
                    }
                }
            }
            if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
                for part in all {
                    self.visit(part, value, depth + 1);
                }
            }
        }
    }
}

/// A step from a value into one of its children.
#[derive(Clone, Copy)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// Why `number` does not fit the type `format` names exactly, if it does not.
fn number_misfit(number: &serde_json::Number, format: &str) -> Option<String> {
    let integer_range: Option<(i128, i128, &str)> = match format {
        "int8" => Some((i8::MIN.into(), i8::MAX.into(), "an 8-bit signed integer")),
        "uint8" => Some((0, u8::MAX.into(), "an 8-bit unsigned integer")),
        "int16" => Some((i16::MIN.into(), i16::MAX.into(), "a 16-bit signed integer")),
        "uint16" => Some((0, u16::MAX.into(), "a 16-bit unsigned integer")),
        "int32" => Some((i32::MIN.into(), i32::MAX.into(), "a 32-bit signed integer")),
        "uint32" => Some((0, u32::MAX.into(), "a 32-bit unsigned integer")),
        "int64" | "int" => Some((i64::MIN.into(), i64::MAX.into(), "a 64-bit signed integer")),
        "uint64" | "uint" => Some((0, u64::MAX.into(), "a 64-bit unsigned integer")),
        _ => None,
    };
    let as_integer = number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from));
    if let Some((min, max, what)) = integer_range {
        return match as_integer {
            Some(n) if n >= min && n <= max => None,
            Some(n) => Some(format!("{n} does not fit {what} ({min} to {max})")),
            None => Some(format!(
                "{number} is not a whole number; send {what} without a fraction or exponent"
            )),
        };
    }
    match format {
        "float" => {
            let exact = match as_integer {
                Some(n) => (n as f32) as i128 == n && (n as f32).is_finite(),
                None => number.as_f64().is_some_and(|v| {
                    let narrowed = v as f32;
                    narrowed.is_finite() && f64::from(narrowed) == v
                }),
            };
            (!exact).then(|| format!("{number} cannot be represented exactly as a 32-bit float; send fewer significant digits"))
        }
        "double" => match as_integer {
            Some(n) if (n as f64) as i128 != n => Some(format!(
                "{number} cannot be represented exactly as a 64-bit float (integers above 2^53 lose digits); send it as a string if the tool needs it exact"
            )),
            _ => None,
        },
        _ => None,
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
