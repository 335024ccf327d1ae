//! Provider exports: OpenAI function tools (Chat Completions plain and strict, and the
//! Responses API's flat form), Anthropic tools and MCP tools, and the provider-native tools
//! each provider runs itself, in that provider's own format.

use serde_json::{Map, Value, json};

use crate::provider::ProviderTool;
use crate::tool::{Audience, Tool};

mod strict;

pub use strict::{strict_schema, strip_strict_nulls};

/// A provider's tool format.
///
/// Provider-native tools (`#[tool(provider)]`) appear in the three OpenAI lists and the Anthropic
/// list as their configuration object for that provider, are left out (with a note) where they
/// have none, and are never in the MCP list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI function tools (`{"type":"function","function":{...}}`), `strict: false`:
    /// optional fields stay optional.
    OpenAi,
    /// OpenAI function tools in strict mode where the schema allows it; a tool whose schema
    /// cannot be made strict is exported with `strict: false` and a note saying why.
    OpenAiStrict,
    /// OpenAI Responses API function tools, flat (`{"type":"function","name","description",
    /// "parameters","strict"}`), strict where the schema allows it exactly as
    /// [`Format::OpenAiStrict`] decides, with the same notes. `strict` is always written: the
    /// Responses API makes a function strict when it is left out, which would turn the optional
    /// fields of a schema that cannot be strict into required ones.
    OpenAiResponses,
    /// Anthropic tools (`{"name","description","input_schema"}`).
    Anthropic,
    /// MCP tools (`name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations`).
    Mcp,
}

impl Format {
    /// Every format, in declaration order.
    pub const ALL: [Format; 5] = [
        Format::OpenAi,
        Format::OpenAiStrict,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Mcp,
    ];

    pub(crate) const COUNT: usize = Format::ALL.len();

    pub(crate) const fn index(self) -> usize {
        match self {
            Format::OpenAi => 0,
            Format::OpenAiStrict => 1,
            Format::OpenAiResponses => 2,
            Format::Anthropic => 3,
            Format::Mcp => 4,
        }
    }

    /// Whether function tools are strict in this format where their schema allows it.
    const fn strict(self) -> bool {
        matches!(self, Format::OpenAiStrict | Format::OpenAiResponses)
    }
}

/// [`export`] for a reader of `locale` (the registry's default being `default_locale`): an MCP
/// entry carries the title resolved by [`Tool::texts`]; the other formats carry no titles and
/// are [`export`]'s.
pub fn export_in(
    tool: &Tool,
    audience: Audience,
    format: Format,
    (locale, default_locale): (&str, &str),
) -> (Option<Value>, Option<String>) {
    if format == Format::Mcp && tool.provider().is_none() {
        let title = tool.texts(locale, default_locale).title;
        return (Some(mcp_titled(tool, title.as_deref())), None);
    }
    export(tool, audience, format)
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
        Format::OpenAiStrict | Format::OpenAiResponses => {
            let (value, note) = match openai_strict(tool, audience) {
                Ok(value) => (value, None),
                Err(reason) => (
                    openai(tool, audience),
                    Some(format!("not strict: {reason}")),
                ),
            };
            let value = if format == Format::OpenAiResponses {
                flat(value)
            } else {
                value
            };
            (Some(value), note)
        }
        Format::Anthropic => (Some(anthropic(tool, audience)), None),
        Format::Mcp => (Some(mcp(tool)), None),
    }
}

/// The entry of the provider-native tool `name` in `format`: the OpenAI configuration as given
/// (strict mode does not apply: the provider defines the tool's input; OpenAI's hosted tools
/// are Responses API tools, so the configuration is already in that API's form), the Anthropic
/// configuration with `name` set when it has none; or why the tool has no entry there.
pub fn provider_entry(
    name: &str,
    provider: &ProviderTool,
    format: Format,
) -> Result<Value, String> {
    match format {
        Format::OpenAi | Format::OpenAiStrict | Format::OpenAiResponses => provider
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

/// A Chat Completions function tool (`{"type":"function","function":{...}}`) in the Responses
/// API's flat form (`{"type":"function","name",...}`).
fn flat(nested: Value) -> Value {
    match nested {
        Value::Object(mut map) => match map.remove("function") {
            Some(Value::Object(mut function)) => {
                function.insert("type".into(), json!("function"));
                Value::Object(function)
            }
            _ => Value::Object(map),
        },
        other => other,
    }
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
    mcp_titled(tool, tool.title())
}

/// The MCP tool object with `title` as its `title` and its annotations' `title`: what a list
/// for a locale serves, the title resolved by [`Tool::texts`].
pub fn mcp_titled(tool: &Tool, title: Option<&str>) -> Value {
    let mut object = Map::new();
    object.insert("name".into(), json!(tool.name()));
    if let Some(title) = title {
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
    if let (Some(title), Some(map)) = (title, annotations.as_object_mut()) {
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
        Format::OpenAiResponses => {
            json!({ "type": "function", "name": name, "description": text, "parameters": schema, "strict": name == "tool_search" })
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
    let wait_schema = if format.strict() {
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
            json!({ "type": "function", "function": { "name": name, "description": text, "parameters": schema, "strict": format.strict() } })
        }
        Format::OpenAiResponses => {
            json!({ "type": "function", "name": name, "description": text, "parameters": schema, "strict": true })
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
    fn responses_entries_are_the_strict_ones_flattened() {
        let nested = json!({ "type": "function", "function": {
            "name": "n", "description": "d", "parameters": { "type": "object" }, "strict": false
        }});
        assert_eq!(
            flat(nested),
            json!({ "type": "function", "name": "n", "description": "d",
                "parameters": { "type": "object" }, "strict": false })
        );
        // Provider-native configurations have no `function` and pass through.
        assert_eq!(
            flat(json!({ "type": "web_search" })),
            json!({ "type": "web_search" })
        );
        for tools in [meta_tools, task_meta_tools] {
            let strict = tools(Format::OpenAiStrict);
            let responses = tools(Format::OpenAiResponses);
            assert_eq!(strict.len(), responses.len());
            for ((name, nested), (same, flat_entry)) in strict.into_iter().zip(responses) {
                assert_eq!(name, same);
                assert_eq!(flat(nested), flat_entry, "{name}");
                assert!(
                    flat_entry["strict"].is_boolean(),
                    "{name}: strict is explicit"
                );
            }
        }
    }

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
