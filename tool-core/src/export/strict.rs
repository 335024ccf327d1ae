//! OpenAI's strict mode: the strict form of a tool's input schema, and mapping the model's
//! `null`s for optional fields back out of its arguments.

use serde_json::{Map, Value, json};

/// OpenAI's documented limits for strict schemas.
const STRICT_MAX_PROPERTIES: usize = 5000;
const STRICT_MAX_DEPTH: usize = 10;
const STRICT_MAX_ENUM_VALUES: usize = 1000;
/// String formats strict mode accepts; others are dropped (they are annotations to us anyway).
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
/// Keywords strict mode rejects that change which values are valid in ways a description cannot
/// carry; a schema that needs one cannot be strict.
const STRICT_UNSUPPORTED: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "prefixItems",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
];
/// Keywords that give a subschema a shape; a subschema with none of them accepts any value.
const SHAPE_KEYWORDS: &[&str] = &[
    "type",
    "anyOf",
    "oneOf",
    "$ref",
    "enum",
    "const",
    "properties",
    "items",
];

/// The strict-mode form of `schema`: every object closed (`additionalProperties: false`) with
/// all properties required, optional ones made nullable; `oneOf` becomes `anyOf`; a `$ref` with
/// sibling keywords is inlined; `default`, length limits and `uniqueItems` (which strict mode
/// does not support) move into the description; unsupported formats are dropped. Errors say
/// why it is impossible and where.
///
/// The tool still validates its input against its own schema, so what moved into descriptions
/// is still enforced; map the model's `null`s back first with [`strip_strict_nulls`].
pub fn strict_schema(schema: &Value) -> Result<Value, String> {
    let mut out = schema.clone();
    if out.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the root of a strict schema must be an object".into());
    }
    let mut strict = Strict {
        root: schema,
        properties: 0,
        inlining: Vec::new(),
    };
    strict.node(&mut out, "", 0)?;
    prune_defs(&mut out);
    if strict.properties > STRICT_MAX_PROPERTIES {
        return Err(format!(
            "the schema has {} properties; strict mode allows {STRICT_MAX_PROPERTIES}",
            strict.properties
        ));
    }
    Ok(out)
}

fn characters(n: u64) -> String {
    if n == 1 {
        "1 character".to_owned()
    } else {
        format!("{n} characters")
    }
}

/// Drops the `$defs` no `$ref` reaches any more (their uses were inlined), so the model is not
/// shown types nothing refers to.
fn prune_defs(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    let Some(Value::Object(mut defs)) = map.remove("$defs") else {
        return;
    };
    let mut reachable: Vec<String> = Vec::new();
    let mut pending = Vec::new();
    map.values()
        .for_each(|child| collect_refs(child, &mut pending));
    while let Some(reference) = pending.pop() {
        let Some(name) = reference.strip_prefix("#/$defs/") else {
            continue;
        };
        if reachable.iter().any(|r| r == name) {
            continue;
        }
        if let Some(def) = defs.get(name) {
            collect_refs(def, &mut pending);
        }
        reachable.push(name.to_owned());
    }
    defs.retain(|name, _| reachable.contains(name));
    if !defs.is_empty() {
        map.insert("$defs".into(), Value::Object(defs));
    }
}

fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                out.push(reference.to_owned());
            }
            map.values().for_each(|child| collect_refs(child, out));
        }
        Value::Array(items) => items.iter().for_each(|child| collect_refs(child, out)),
        _ => {}
    }
}

/// The walk of [`strict_schema`].
struct Strict<'a> {
    /// The original schema, which `$ref`s resolve against.
    root: &'a Value,
    /// Properties counted so far.
    properties: usize,
    /// The `$ref`s being inlined, to refuse a recursive one instead of looping.
    inlining: Vec<String>,
}

impl Strict<'_> {
    /// Makes the schema `node`, at `path` and `depth` objects deep, strict, and everything
    /// under it.
    fn node(&mut self, node: &mut Value, path: &str, depth: usize) -> Result<(), String> {
        let at = if path.is_empty() { "/" } else { path };
        let map = match node {
            Value::Object(map) => map,
            Value::Bool(true) => {
                return Err(format!(
                    "the schema at {at} accepts any JSON value; strict mode needs a type there"
                ));
            }
            _ => return Ok(()),
        };
        check_expressible(map, at)?;
        // Annotations for the runtime (a sensitive field is `writeOnly`), not keywords strict
        // mode documents: left out of what the provider is sent.
        map.remove("writeOnly");
        map.remove("readOnly");

        // Strict mode rejects `{"$ref": ..., "description": ...}`: inline the target, keeping
        // the siblings (they win, as they describe this use of the type).
        if map.len() > 1
            && let Some(reference) = map.get("$ref").and_then(Value::as_str).map(str::to_owned)
        {
            self.inline_ref(map, &reference, at)?;
            self.inlining.push(reference);
            let result = self.node(node, path, depth);
            self.inlining.pop();
            return result;
        }

        relax_keywords(map);
        let is_object = map.get("type").and_then(Value::as_str) == Some("object")
            || map.contains_key("properties");
        if is_object {
            self.close_object(map, path, at, depth)?;
        }
        self.children(map, path, depth)
    }

    /// Replaces the `$ref` to `reference` in `map` (the schema at `at`) with the keywords of its
    /// target, the ones `map` already has winning. Refuses a recursive reference, which would
    /// never end, and one that does not resolve.
    fn inline_ref(
        &self,
        map: &mut Map<String, Value>,
        reference: &str,
        at: &str,
    ) -> Result<(), String> {
        if self.inlining.iter().any(|r| r == reference) {
            return Err(format!(
                "the recursive `$ref` {reference} at {at} has sibling keywords, which strict mode cannot express"
            ));
        }
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| self.root.pointer(pointer))
            .and_then(Value::as_object)
            .ok_or_else(|| {
                format!("the `$ref` {reference} at {at} does not resolve within the schema")
            })?;
        map.remove("$ref");
        for (key, value) in target {
            if !map.contains_key(key) {
                map.insert(key.clone(), value.clone());
            }
        }
        Ok(())
    }

    /// Closes the object schema `map` at `path` (`at` when shown): no keys but its properties,
    /// every property required and the optional ones nullable, each property made strict.
    fn close_object(
        &mut self,
        map: &mut Map<String, Value>,
        path: &str,
        at: &str,
        depth: usize,
    ) -> Result<(), String> {
        if depth >= STRICT_MAX_DEPTH {
            return Err(format!(
                "objects nest deeper than {STRICT_MAX_DEPTH} levels at {at}"
            ));
        }
        match map.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => {
                return Err(format!(
                    "the object at {at} accepts arbitrary keys (a map); strict mode needs every property named"
                ));
            }
        }
        map.insert("additionalProperties".into(), Value::Bool(false));
        let required: Vec<String> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut all = Vec::new();
        if let Some(Value::Object(props)) = map.get_mut("properties") {
            self.properties += props.len();
            for (key, property) in props.iter_mut() {
                self.node(property, &format!("{path}/{key}"), depth + 1)?;
                if !required.contains(key) {
                    make_nullable(property);
                }
                all.push(Value::String(key.clone()));
            }
        }
        map.insert("required".into(), Value::Array(all));
        Ok(())
    }

    /// Makes the subschemas of `map` (at `path`) strict: array items, `anyOf` branches and
    /// definitions, which start again at depth 0 as `$ref` targets.
    fn children(
        &mut self,
        map: &mut Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<(), String> {
        for keyword in ["items", "anyOf", "$defs", "definitions"] {
            match map.get_mut(keyword) {
                Some(Value::Object(child)) if keyword == "$defs" || keyword == "definitions" => {
                    for (name, def) in child.iter_mut() {
                        self.node(def, &format!("#/{keyword}/{name}"), 0)?;
                    }
                }
                Some(child @ (Value::Object(_) | Value::Bool(_))) => {
                    self.node(child, &format!("{path}/{keyword}"), depth + 1)?
                }
                Some(Value::Array(children)) => {
                    for (i, child) in children.iter_mut().enumerate() {
                        self.node(child, &format!("{path}/{keyword}/{i}"), depth + 1)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Refuses the schema `map` at `at` when strict mode cannot express it: a keyword strict mode
/// rejects, no keyword that gives it a shape, or more enum values than allowed.
fn check_expressible(map: &Map<String, Value>, at: &str) -> Result<(), String> {
    for keyword in STRICT_UNSUPPORTED {
        if map.contains_key(*keyword) {
            return Err(format!(
                "`{keyword}` at {at} is not supported in strict mode"
            ));
        }
    }
    if !SHAPE_KEYWORDS.iter().any(|k| map.contains_key(*k)) {
        return Err(format!(
            "the schema at {at} accepts any JSON value; strict mode needs a type there"
        ));
    }
    if let Some(values) = map.get("enum").and_then(Value::as_array)
        && values.len() > STRICT_MAX_ENUM_VALUES
    {
        return Err(format!(
            "the enum at {at} has {} values; strict mode allows {STRICT_MAX_ENUM_VALUES}",
            values.len()
        ));
    }
    Ok(())
}

/// Rewrites the keywords of `map` that strict mode rejects but can do without: `oneOf` becomes
/// `anyOf`, unsupported formats are dropped, and length limits, `uniqueItems` and `default` move
/// into the description, where the model still reads them.
fn relax_keywords(map: &mut Map<String, Value>) {
    if let Some(one_of) = map.remove("oneOf") {
        map.insert("anyOf".into(), one_of);
    }
    if let Some(format) = map.get("format").and_then(Value::as_str)
        && !STRICT_FORMATS.contains(&format)
    {
        map.remove("format");
    }
    let mut notes = Vec::new();
    match (
        map.remove("minLength").and_then(|v| v.as_u64()),
        map.remove("maxLength").and_then(|v| v.as_u64()),
    ) {
        (Some(min), Some(max)) => notes.push(format!("{min} to {max} characters.")),
        (Some(min), None) => notes.push(format!("At least {}.", characters(min))),
        (None, Some(max)) => notes.push(format!("At most {}.", characters(max))),
        (None, None) => {}
    }
    if map.remove("uniqueItems") == Some(Value::Bool(true)) {
        notes.push("Items must be unique.".to_owned());
    }
    if let Some(default) = map.remove("default") {
        notes.push(format!("Default: {default}."));
    }
    if notes.is_empty() {
        return;
    }
    let mut text = map
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_default();
    for note in notes {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&note);
    }
    map.insert("description".into(), Value::String(text));
}

/// Lets `schema` also accept `null` (how strict mode spells "optional").
fn make_nullable(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    match map.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
            return;
        }
        Some(Value::Array(types)) => {
            if !types.contains(&json!("null")) {
                types.push(json!("null"));
            }
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
            return;
        }
        _ => {}
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        if !branches
            .iter()
            .any(|b| b.get("type") == Some(&json!("null")))
        {
            branches.push(json!({ "type": "null" }));
        }
        return;
    }
    let description = map.remove("description");
    let inner = Value::Object(std::mem::take(map));
    map.insert("anyOf".into(), json!([inner, { "type": "null" }]));
    if let Some(description) = description {
        map.insert("description".into(), description);
    }
}

/// Removes `null` values that strict mode sent for optional fields the original schema does not
/// let be `null`, so the input validates against the tool's own schema (and defaults apply).
///
/// It follows the original schema through `$ref`s, nested objects, array items and the object
/// branch of `Option<Struct>` (`anyOf`/`oneOf`).
pub fn strip_strict_nulls(original: &Value, input: &mut Value) {
    strip(original, original, input, 0);
}

fn strip(root: &Value, schema: &Value, input: &mut Value, depth: usize) {
    if depth > 32 {
        return;
    }
    let schema = follow(root, schema);
    for keyword in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
            for branch in branches {
                strip(root, branch, input, depth + 1);
            }
        }
    }
    match input {
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    strip(root, item_schema, item, depth + 1);
                }
            }
        }
        Value::Object(object) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            object.retain(|key, value| {
                !(value.is_null()
                    && !required.contains(&key.as_str())
                    && properties.get(key).is_some_and(|p| !accepts_null(root, p)))
            });
            for (key, value) in object.iter_mut() {
                if let Some(property) = properties.get(key) {
                    strip(root, property, value, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn follow<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
    {
        Some(pointer) => root.pointer(pointer).unwrap_or(schema),
        None => schema,
    }
}

fn accepts_null(root: &Value, schema: &Value) -> bool {
    let schema = follow(root, schema);
    match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.contains(&json!("null")),
        _ => {
            ["anyOf", "oneOf"].iter().any(|k| {
                schema
                    .get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|branches| branches.iter().any(|b| accepts_null(root, b)))
            }) || schema.as_object().is_some_and(|m| m.is_empty())
        }
    }
}
