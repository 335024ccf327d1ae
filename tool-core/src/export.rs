//! Provider exports: OpenAI function tools (plain and strict), Anthropic tools and MCP tools,
//! and the provider-native tools each provider runs itself, in that provider's own format.

use serde_json::{Map, Value, json};

use crate::provider::ProviderTool;
use crate::tool::{Audience, Tool};

/// A provider's tool format.
///
/// Provider-native tools (`#[tool(provider)]`) appear in the OpenAI and Anthropic lists as their
/// configuration object for that provider, are left out (with a note) where they have none, and
/// are never in the MCP list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI function tools (`{"type":"function","function":{...}}`), `strict: false`:
    /// optional fields stay optional.
    OpenAi,
    /// OpenAI function tools in strict mode where the schema allows it; a tool whose schema
    /// cannot be made strict is exported with `strict: false` and a note saying why.
    OpenAiStrict,
    /// Anthropic tools (`{"name","description","input_schema"}`).
    Anthropic,
    /// MCP tools (`name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations`).
    Mcp,
}

impl Format {
    pub(crate) const COUNT: usize = 4;

    pub(crate) const fn index(self) -> usize {
        match self {
            Format::OpenAi => 0,
            Format::OpenAiStrict => 1,
            Format::Anthropic => 2,
            Format::Mcp => 3,
        }
    }
}

/// `tool` in `format` for `audience`, with a note when the export had to compromise. The entry
/// is `None` when the tool has no form in `format`: a provider-native tool without a
/// configuration for that provider, or in MCP (the note says why).
pub fn export(tool: &Tool, audience: Audience, format: Format) -> (Option<Value>, Option<String>) {
    if let Some(provider) = tool.provider() {
        return match provider_entry(tool.name(), provider, format) {
            Ok(value) => (Some(value), None),
            Err(reason) => (None, Some(reason)),
        };
    }
    match format {
        Format::OpenAi => (Some(openai(tool, audience)), None),
        Format::OpenAiStrict => match openai_strict(tool, audience) {
            Ok(value) => (Some(value), None),
            Err(reason) => (
                Some(openai(tool, audience)),
                Some(format!("not strict: {reason}")),
            ),
        },
        Format::Anthropic => (Some(anthropic(tool, audience)), None),
        Format::Mcp => (Some(mcp(tool)), None),
    }
}

/// The entry of the provider-native tool `name` in `format`: the OpenAI configuration as given
/// (strict mode does not apply: the provider defines the tool's input), the Anthropic
/// configuration with `name` set when it has none; or why the tool has no entry there.
pub fn provider_entry(
    name: &str,
    provider: &ProviderTool,
    format: Format,
) -> Result<Value, String> {
    match format {
        Format::OpenAi | Format::OpenAiStrict => provider
            .openai_config()
            .cloned()
            .ok_or_else(|| "not sent to OpenAI: no openai configuration".to_owned()),
        Format::Anthropic => provider
            .anthropic_entry(name)
            .ok_or_else(|| "not sent to Anthropic: no anthropic configuration".to_owned()),
        Format::Mcp => Err(
            "not served over MCP: the model provider runs it, and an MCP client cannot".to_owned(),
        ),
    }
}

/// The OpenAI function tool, `strict: false` (optional fields stay optional). For a
/// provider-native tool use [`export`] or [`provider_entry`]: this builds a function tool.
pub fn openai(tool: &Tool, audience: Audience) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name(),
            "description": tool.description_for(audience),
            "parameters": tool.input_schema(),
            "strict": false,
        }
    })
}

/// The OpenAI function tool in strict mode, or why the schema cannot be strict. For a
/// provider-native tool use [`export`] or [`provider_entry`].
pub fn openai_strict(tool: &Tool, audience: Audience) -> Result<Value, String> {
    let parameters = strict_schema(tool.input_schema())?;
    Ok(json!({
        "type": "function",
        "function": {
            "name": tool.name(),
            "description": tool.description_for(audience),
            "parameters": parameters,
            "strict": true,
        }
    }))
}

/// The Anthropic tool. Anthropic accepts `$defs`/`$ref`; the schema is passed as is. For a
/// provider-native tool use [`export`] or [`provider_entry`].
pub fn anthropic(tool: &Tool, audience: Audience) -> Value {
    json!({
        "name": tool.name(),
        "description": tool.description_for(audience),
        "input_schema": tool.input_schema(),
    })
}

/// The MCP tool object. Provider-native tools have none (MCP clients cannot run them).
pub fn mcp(tool: &Tool) -> Value {
    let mut object = Map::new();
    object.insert("name".into(), json!(tool.name()));
    if let Some(title) = tool.title() {
        object.insert("title".into(), json!(title));
    }
    // An MCP client runs its own turn loop, where "calling this tool ends your turn" is not
    // true, so the MCP description never carries that sentence (the User audience omits it).
    object.insert(
        "description".into(),
        json!(tool.description_for(Audience::User)),
    );
    object.insert("inputSchema".into(), portable_formats(tool.input_schema()));
    if let Some(output) = tool.output_schema() {
        object.insert("outputSchema".into(), portable_formats(output));
    }
    let mut annotations = serde_json::to_value(tool.annotations()).unwrap_or(json!({}));
    if let (Some(title), Some(map)) = (tool.title(), annotations.as_object_mut()) {
        map.insert("title".into(), json!(title));
    }
    object.insert("annotations".into(), annotations);
    Value::Object(object)
}

/// `schema` with the integer formats schemars writes and JSON Schema validators do not know
/// (`uint8` … `uint64`, `uint`, `int8`, `int16`, `int`, and the 128-bit ones) replaced by the
/// bounds they mean: the official TypeScript SDK prints `unknown format "uint64" ignored` for
/// each of them, while `minimum`/`maximum` every validator checks. The formats its validator
/// knows (`int32`, `int64`, `float`, `double`) stay. Bounds the schema already has are kept;
/// 64-bit and wider types keep only their sign bound (their maximum is not exact as a JSON
/// number).
pub fn portable_formats(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            // Values (defaults, examples, constants) are data, not schemas: left as they are.
            let mut out: Map<String, Value> = map
                .iter()
                .map(|(key, value)| match key.as_str() {
                    "default" | "examples" | "const" | "enum" => (key.clone(), value.clone()),
                    _ => (key.clone(), portable_formats(value)),
                })
                .collect();
            let bounds = out
                .get("format")
                .and_then(Value::as_str)
                .and_then(integer_bounds);
            if let Some((minimum, maximum)) = bounds {
                out.remove("format");
                for (key, bound) in [("minimum", minimum), ("maximum", maximum)] {
                    if let Some(bound) = bound {
                        out.entry(key).or_insert(bound);
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(portable_formats).collect()),
        other => other.clone(),
    }
}

/// The `minimum` and `maximum` an integer format validators do not know means (`None`: a
/// format to keep).
fn integer_bounds(format: &str) -> Option<(Option<Value>, Option<Value>)> {
    let bounds = |minimum: Value, maximum: Value| (Some(minimum), Some(maximum));
    Some(match format {
        "uint8" => bounds(json!(0), json!(u8::MAX)),
        "uint16" => bounds(json!(0), json!(u16::MAX)),
        "uint32" => bounds(json!(0), json!(u32::MAX)),
        "uint64" | "uint" | "uint128" => (Some(json!(0)), None),
        "int8" => bounds(json!(i8::MIN), json!(i8::MAX)),
        "int16" => bounds(json!(i16::MIN), json!(i16::MAX)),
        "int" | "int128" => (None, None),
        _ => return None,
    })
}

/// `tool_search` and `tool_call` in `format`, for audiences with deferred tools.
pub fn meta_tools(format: Format) -> Vec<(&'static str, Value)> {
    let search_schema = json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "description": "Words describing the capability you need, e.g. \"export pdf\"." }
        },
        "required": ["query"],
        "additionalProperties": false
    });
    let call_schema = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "The exact name of a tool found with tool_search." },
            "input": { "type": "object", "description": "The tool's input, matching the schema tool_search returned." }
        },
        "required": ["name", "input"],
        "additionalProperties": false
    });
    let search_text = "Find tools that are not in your tool list. Returns matching tools with their names, descriptions and input schemas. Use it when no listed tool fits the task.";
    let call_text = "Call a tool found with tool_search, by its exact name, with its input.";
    let render = |name: &str, text: &str, schema: &Value| match format {
        Format::OpenAi => {
            json!({ "type": "function", "function": { "name": name, "description": text, "parameters": schema, "strict": false } })
        }
        // `input` is free-form, which strict mode cannot express, so `tool_call` stays non-strict.
        Format::OpenAiStrict => {
            json!({ "type": "function", "function": { "name": name, "description": text, "parameters": schema, "strict": name == "tool_search" } })
        }
        Format::Anthropic => json!({ "name": name, "description": text, "input_schema": schema }),
        Format::Mcp => {
            json!({ "name": name, "description": text, "inputSchema": schema, "annotations": { "readOnlyHint": name == "tool_search" } })
        }
    };
    vec![
        (
            "tool_search",
            render("tool_search", search_text, &search_schema),
        ),
        ("tool_call", render("tool_call", call_text, &call_schema)),
    ]
}

/// `task_wait` and `task_cancel` in `format`, for audiences with `task` or `serve` tools.
pub fn task_meta_tools(format: Format) -> Vec<(&'static str, Value)> {
    // Strict mode needs every property required, so optional ones are nullable there; other
    // formats leave them out of `required`.
    let wait_schema = if format == Format::OpenAiStrict {
        json!({
            "type": "object",
            "properties": {
                "task_id": { "type": ["string", "null"], "description": "The task to wait for, from its receipt; null waits for any task of this turn." },
                "timeout_seconds": { "type": ["integer", "null"], "minimum": 1, "maximum": 300, "description": "How long to wait at most, in seconds (null: 30)." }
            },
            "required": ["task_id", "timeout_seconds"],
            "additionalProperties": false
        })
    } else {
        json!({
            "type": "object",
            "properties": {
                "task_id": { "type": "string", "description": "The task to wait for, from its receipt; leave it out to wait for any task of this turn." },
                "timeout_seconds": { "type": "integer", "minimum": 1, "maximum": 300, "description": "How long to wait at most, in seconds (default 30)." }
            },
            "additionalProperties": false
        })
    };
    let cancel_schema = json!({
        "type": "object",
        "properties": {
            "task_id": { "type": "string", "description": "The task to cancel, from its receipt." }
        },
        "required": ["task_id"],
        "additionalProperties": false
    });
    let wait_text = "Wait for the result of a task started earlier in this turn (its receipt gave the task_id). Returns the result, or says the task is still running when the wait times out; results also arrive on their own in task_result messages.";
    let cancel_text = "Cancel a running task by its task_id. The task stops after its cleanup; its result will not arrive.";
    let render = |name: &str, text: &str, schema: &Value, read_only: bool| match format {
        Format::OpenAi | Format::OpenAiStrict => {
            json!({ "type": "function", "function": { "name": name, "description": text, "parameters": schema, "strict": format == Format::OpenAiStrict } })
        }
        Format::Anthropic => json!({ "name": name, "description": text, "input_schema": schema }),
        Format::Mcp => {
            json!({ "name": name, "description": text, "inputSchema": schema, "annotations": { "readOnlyHint": read_only, "destructiveHint": !read_only } })
        }
    };
    vec![
        (
            "task_wait",
            render("task_wait", wait_text, &wait_schema, true),
        ),
        (
            "task_cancel",
            render("task_cancel", cancel_text, &cancel_schema, false),
        ),
    ]
}

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

#[cfg(test)]
mod tests {

    #[test]
    fn integer_formats_validators_do_not_know_become_bounds() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": { "type": "integer", "format": "uint8", "minimum": 0 },
                "b": { "type": "integer", "format": "uint64", "minimum": 0 },
                "c": { "type": ["integer", "null"], "format": "int16" },
                "d": { "type": "integer", "format": "int32" },
                "e": { "type": "number", "format": "double" },
                "f": { "type": "array", "items": { "type": "integer", "format": "uint32" } },
                "g": { "type": "integer", "format": "uint16", "maximum": 10 },
                "h": { "type": "string", "format": "date-time" },
                "i": { "type": "object", "default": { "format": "uint8" } }
            },
            "$defs": { "N": { "type": "integer", "format": "int" } }
        });
        assert_eq!(
            portable_formats(&schema),
            json!({
                "type": "object",
                "properties": {
                    "a": { "type": "integer", "minimum": 0, "maximum": 255 },
                    "b": { "type": "integer", "minimum": 0 },
                    "c": { "type": ["integer", "null"], "minimum": -32768, "maximum": 32767 },
                    "d": { "type": "integer", "format": "int32" },
                    "e": { "type": "number", "format": "double" },
                    "f": { "type": "array", "items": { "type": "integer", "minimum": 0, "maximum": 4294967295u32 } },
                    "g": { "type": "integer", "minimum": 0, "maximum": 10 },
                    "h": { "type": "string", "format": "date-time" },
                    "i": { "type": "object", "default": { "format": "uint8" } }
                },
                "$defs": { "N": { "type": "integer" } }
            })
        );
    }
    use super::*;

    #[test]
    fn strict_closes_objects_and_nulls_optional_fields() {
        let schema = json!({
            "type": "object",
            "properties": {
                "service": { "type": "string" },
                "limit": { "type": "integer", "format": "uint32", "default": 50, "minimum": 1 },
                "window": { "$ref": "#/$defs/Window" }
            },
            "required": ["service"],
            "$defs": { "Window": { "type": "string", "enum": ["5m", "1h"] } }
        });
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(strict["additionalProperties"], json!(false));
        assert_eq!(strict["required"], json!(["limit", "service", "window"]));
        assert_eq!(
            strict["properties"]["limit"]["type"],
            json!(["integer", "null"])
        );
        assert!(strict["properties"]["limit"].get("format").is_none());
        assert_eq!(
            strict["properties"]["limit"]["description"],
            json!("Default: 50.")
        );
        assert_eq!(
            strict["properties"]["window"],
            json!({ "anyOf": [{ "$ref": "#/$defs/Window" }, { "type": "null" }] })
        );
    }

    #[test]
    fn strict_refuses_maps_with_a_reason() {
        let schema = json!({
            "type": "object",
            "properties": { "tags": { "type": "object", "additionalProperties": { "type": "string" } } }
        });
        let reason = strict_schema(&schema).unwrap_err();
        assert!(reason.contains("/tags"), "{reason}");
        assert!(reason.contains("arbitrary keys"), "{reason}");
    }

    #[test]
    fn strict_inlines_refs_with_siblings_and_drops_unused_defs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "target": { "$ref": "#/$defs/Target", "description": "Where." },
                "backup": { "$ref": "#/$defs/Target" }
            },
            "required": ["target", "backup"],
            "$defs": {
                "Target": { "type": "object", "properties": { "host": { "type": "string" } }, "required": ["host"] },
                "Unused": { "type": "string" }
            }
        });
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(
            strict["properties"]["target"],
            json!({
                "type": "object",
                "description": "Where.",
                "properties": { "host": { "type": "string" } },
                "required": ["host"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            strict["properties"]["backup"],
            json!({ "$ref": "#/$defs/Target" })
        );
        assert_eq!(strict["$defs"].as_object().unwrap().len(), 1);
        assert_eq!(
            strict["$defs"]["Target"]["additionalProperties"],
            json!(false)
        );
    }

    #[test]
    fn strict_refuses_what_it_cannot_express_and_says_where() {
        let recursive = json!({
            "type": "object",
            "properties": { "root": { "$ref": "#/$defs/Node" } },
            "required": ["root"],
            "$defs": { "Node": {
                "type": "object",
                "properties": { "child": { "$ref": "#/$defs/Node", "description": "Next." } },
                "required": ["child"]
            } }
        });
        let reason = strict_schema(&recursive).unwrap_err();
        assert!(reason.contains("recursive `$ref` #/$defs/Node"), "{reason}");

        for (property, expected) in [
            (json!(true), "the schema at /x accepts any JSON value"),
            (
                json!({ "description": "Anything." }),
                "the schema at /x accepts any JSON value",
            ),
            (
                json!({ "type": "array", "prefixItems": [{ "type": "string" }] }),
                "`prefixItems` at /x",
            ),
            (json!({ "allOf": [{ "type": "string" }] }), "`allOf` at /x"),
        ] {
            let schema = json!({ "type": "object", "properties": { "x": property } });
            let reason = strict_schema(&schema).unwrap_err();
            assert!(reason.contains(expected), "{reason}");
        }
        assert!(strict_schema(&json!({ "type": "string" })).is_err());
    }

    #[test]
    fn strict_moves_length_and_uniqueness_into_the_description() {
        let schema = json!({
            "type": "object",
            "properties": {
                "code": { "type": "string", "minLength": 4, "description": "The code." },
                "name": { "type": "string", "maxLength": 10 },
                "tags": { "type": "array", "items": { "type": "string", "minLength": 1 }, "uniqueItems": true }
            },
            "required": ["code", "name", "tags"]
        });
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(
            strict["properties"]["code"],
            json!({ "type": "string", "description": "The code. At least 4 characters." })
        );
        assert_eq!(
            strict["properties"]["name"],
            json!({ "type": "string", "description": "At most 10 characters." })
        );
        assert_eq!(
            strict["properties"]["tags"],
            json!({
                "type": "array",
                "description": "Items must be unique.",
                "items": { "type": "string", "description": "At least 1 character." }
            })
        );
    }

    #[test]
    fn strict_nulls_are_stripped_inside_options_and_arrays() {
        let schema = json!({
            "type": "object",
            "properties": {
                "filter": { "anyOf": [{ "$ref": "#/$defs/Filter" }, { "type": "null" }] },
                "items": { "type": "array", "items": { "$ref": "#/$defs/Filter" } }
            },
            "$defs": { "Filter": {
                "type": "object",
                "properties": { "limit": { "type": "integer" }, "label": { "type": ["string", "null"] } }
            } }
        });
        let mut input = json!({
            "filter": { "limit": null, "label": null },
            "items": [{ "limit": null, "label": "a" }]
        });
        strip_strict_nulls(&schema, &mut input);
        assert_eq!(
            input,
            json!({ "filter": { "label": null }, "items": [{ "label": "a" }] })
        );
        let mut none = json!({ "filter": null });
        strip_strict_nulls(&schema, &mut none);
        assert_eq!(none, json!({ "filter": null }));
    }

    #[test]
    fn strict_nulls_are_stripped_back() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "string" }, "b": { "type": ["string", "null"] } },
            "required": []
        });
        let mut input = json!({ "a": null, "b": null });
        strip_strict_nulls(&schema, &mut input);
        assert_eq!(input, json!({ "b": null }));
    }
}
