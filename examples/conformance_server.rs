//! The fixtures of the official MCP conformance suite (`@modelcontextprotocol/conformance`),
//! served by toolwright: its tools written as `#[tool]` fns, and its prompts, resources,
//! resource templates, subscriptions and completions in an `rmcp` handler composed into the
//! server with [`McpServer::compose`].
//!
//! ```sh
//! cargo run --example conformance_server                          # http://127.0.0.1:8766/mcp
//! cargo run --example conformance_server -- --addr 127.0.0.1:0    # any free port
//! npx @modelcontextprotocol/conformance server --url http://127.0.0.1:8766/mcp
//! ```
//!
//! `tests/mcp_conformance.rs` runs the suite against it. It prints one line,
//! `listening on http://<addr>/mcp`, once it accepts connections. Parked calls and journals
//! live in a SQLite file (`--db`, default a file in a fresh temporary directory).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Parser;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright::mcp::rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Resource,
    ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use toolwright::mcp::rmcp::service::RequestContext;
use toolwright::mcp::rmcp::{ErrorData, RoleServer, ServerHandler};
use toolwright::mcp::{McpHttp, McpServer};
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SqliteStore};

/// A 1×1 PNG.
const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file with one sample.
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

#[derive(Parser)]
#[command(about = "Serve the MCP conformance suite's fixtures")]
struct Cli {
    /// The HTTP address (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8766")]
    addr: SocketAddr,
    /// The SQLite file holding sessions, parked calls and journals (default: a temporary one).
    #[arg(long)]
    db: Option<PathBuf>,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct NoArgs {}

/// Returns a fixed text, for testing.
#[tool(effect = read)]
async fn test_simple_text(_args: NoArgs) -> Result<ModelOutput, ToolError> {
    Ok(ModelOutput::text(
        "This is a simple text response for testing.",
    ))
}

/// Returns a 1×1 PNG image, for testing.
#[tool(effect = read, to_model_output = shown)]
async fn test_image_content(_args: NoArgs) -> Result<ModelOutput, ToolError> {
    Ok(ModelOutput::content([ContentPart::file(
        IMAGE,
        "image/png",
    )]))
}

/// Returns a short WAV clip, for testing.
#[tool(effect = read, to_model_output = shown)]
async fn test_audio_content(_args: NoArgs) -> Result<ModelOutput, ToolError> {
    Ok(ModelOutput::content([ContentPart::file(
        AUDIO,
        "audio/wav",
    )]))
}

/// Returns an embedded text resource, for testing.
#[tool(effect = read, to_model_output = shown)]
async fn test_embedded_resource(_args: NoArgs) -> Result<ModelOutput, ToolError> {
    Ok(ModelOutput::content([ContentPart::resource_text(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    )]))
}

/// Returns text, an image and an embedded resource in one result, for testing.
#[tool(effect = read, to_model_output = shown)]
async fn test_multiple_content_types(_args: NoArgs) -> Result<ModelOutput, ToolError> {
    Ok(ModelOutput::content([
        ContentPart::text("Multiple content types test:"),
        ContentPart::file(IMAGE, "image/png"),
        ContentPart::resource_text(
            "test://mixed-content-resource",
            "application/json",
            json!({ "test": "data", "value": 123 }).to_string(),
        ),
    ]))
}

/// What the model (and the MCP client) sees of a tool that returns content parts: the parts.
fn shown(output: &ModelOutput) -> ModelOutput {
    output.clone()
}

/// Logs three lines while it runs, for testing log notifications.
#[tool(effect = read)]
async fn test_tool_with_logging(_args: NoArgs, ctx: ToolContext) -> Result<String, ToolError> {
    ctx.info("Tool execution started");
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.info("Tool processing data");
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.info("Tool execution completed");
    Ok("Tool with logging executed successfully".to_owned())
}

/// Reports progress 0, 50 and 100 of 100 while it runs, for testing progress notifications.
#[tool(effect = read)]
async fn test_tool_with_progress(_args: NoArgs, ctx: ToolContext) -> Result<String, ToolError> {
    for (i, progress) in [0, 50, 100].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ctx.partial(&json!({ "progress": progress, "total": 100 }));
    }
    Ok("Tool with progress executed successfully".to_owned())
}

/// Always fails, for testing error results.
#[tool(effect = read)]
async fn test_error_handling(_args: NoArgs) -> Result<String, ToolError> {
    Err(ToolError::new(
        "This tool intentionally returns an error for testing",
    ))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct SamplingArgs {
    /// The prompt to send to the client's model.
    prompt: String,
}

/// Asks the client's model (MCP sampling), for testing the model handle.
#[tool(effect = read)]
async fn test_sampling(args: SamplingArgs, ctx: ToolContext) -> Result<String, ToolError> {
    let answer = ctx
        .model()
        .prompt(args.prompt)
        .max_tokens(100)
        .text()
        .await?;
    Ok(format!("LLM response: {answer}"))
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ElicitationArgs {
    /// The message to show the user.
    message: String,
}

/// Asks the user for a username and an email address, for testing elicitation.
#[tool(effect = read, workflow = execute)]
async fn test_elicitation(
    args: ElicitationArgs,
    ctx: WorkflowContext,
) -> Result<String, ToolError> {
    let form = json!({
        "type": "object",
        "properties": {
            "username": { "type": "string", "description": "User's response" },
            "email": { "type": "string", "description": "User's email address" },
        },
        "required": ["username", "email"],
    });
    let answer = ctx
        .ask(AskRequest::new(args.message).with_form(form))
        .await?;
    Ok(format!("User response: {}", described(&answer)))
}

/// Asks for a form whose fields all have defaults (SEP-1034), for testing elicitation.
#[tool(effect = read, workflow = execute)]
async fn test_elicitation_sep1034_defaults(
    _args: NoArgs,
    ctx: WorkflowContext,
) -> Result<String, ToolError> {
    let form = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "User name", "default": "John Doe" },
            "age": { "type": "integer", "description": "User age", "default": 30 },
            "score": { "type": "number", "description": "User score", "default": 95.5 },
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": { "type": "boolean", "description": "Verification status", "default": true },
        },
        "required": [],
    });
    let ask = AskRequest::new("Please review and update the form fields with defaults");
    let answer = ctx.ask(ask.with_form(form)).await?;
    Ok(format!("Elicitation completed: {}", described(&answer)))
}

/// Asks for a form with the five kinds of enum fields (SEP-1330), for testing elicitation.
#[tool(effect = read, workflow = execute)]
async fn test_elicitation_sep1330_enums(
    _args: NoArgs,
    ctx: WorkflowContext,
) -> Result<String, ToolError> {
    let titled = |items: [(&str, &str); 3]| -> Vec<Value> {
        items
            .iter()
            .map(|(value, title)| json!({ "const": value, "title": title }))
            .collect()
    };
    let form = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")]),
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": { "anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")]) },
            },
        },
        "required": [],
    });
    let ask = AskRequest::new("Please select options from the enum fields");
    let answer = ctx.ask(ask.with_form(form)).await?;
    Ok(format!("Elicitation completed: {}", described(&answer)))
}

/// An answer as the reference server words it: `action=…, content={…}`.
fn described(answer: &AskAnswer) -> String {
    match answer {
        AskAnswer::Filled { fields } => format!("action=accept, content={fields}"),
        AskAnswer::Answered { .. } => "action=accept, content={}".to_owned(),
        _ => "action=cancel, content={}".to_owned(),
    }
}

#[derive(Deserialize, JsonSchema)]
struct Address {
    street: Option<String>,
    city: Option<String>,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(deny_unknown_fields)]
struct SchemaArgs {
    name: Option<String>,
    address: Option<Address>,
}

/// Tool with JSON Schema 2020-12 features.
#[tool(effect = read)]
async fn json_schema_2020_12_tool(args: SchemaArgs) -> Result<String, ToolError> {
    let address = args
        .address
        .map(|a| json!({ "street": a.street, "city": a.city }));
    Ok(format!(
        "JSON Schema 2020-12 tool called with: {}",
        json!({ "name": args.name, "address": address })
    ))
}

/// The suite's prompts, resources and completions, as an `rmcp` handler.
#[derive(Clone, Default)]
struct Fixtures {
    /// The URIs clients subscribed to.
    subscribed: Arc<Mutex<BTreeSet<String>>>,
}

impl Fixtures {
    fn prompts() -> Vec<Prompt> {
        let arg = |name: &str, description: &str| {
            let mut arg = PromptArgument::new(name).with_required(true);
            arg.description = Some(description.to_owned());
            arg
        };
        vec![
            Prompt::new(
                "test_simple_prompt",
                Some("A simple prompt without arguments"),
                None,
            ),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt with two required arguments"),
                Some(vec![
                    arg("arg1", "First test argument"),
                    arg("arg2", "Second test argument"),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt that embeds a resource"),
                Some(vec![arg("resourceUri", "URI of the resource to embed")]),
            ),
            Prompt::new(
                "test_prompt_with_image",
                Some("A prompt with an image"),
                None,
            ),
        ]
    }

    fn prompt(
        name: &str,
        args: &serde_json::Map<String, Value>,
    ) -> Result<GetPromptResult, ErrorData> {
        let arg = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("the prompt `{name}` needs the argument `{key}`"),
                        None,
                    )
                })
        };
        let messages = match name {
            "test_simple_prompt" => {
                vec![PromptMessage::new_text(
                    Role::User,
                    "This is a simple prompt for testing.",
                )]
            }
            "test_prompt_with_arguments" => vec![PromptMessage::new_text(
                Role::User,
                format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    arg("arg1")?,
                    arg("arg2")?
                ),
            )],
            "test_prompt_with_embedded_resource" => vec![
                PromptMessage::new(
                    Role::User,
                    toolwright::mcp::rmcp::model::ContentBlock::resource(
                        ResourceContents::TextResourceContents {
                            uri: arg("resourceUri")?,
                            mime_type: Some("text/plain".to_owned()),
                            text: "Embedded resource content for testing.".to_owned(),
                            meta: None,
                        },
                    ),
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ],
            "test_prompt_with_image" => vec![
                PromptMessage::new(
                    Role::User,
                    toolwright::mcp::rmcp::model::ContentBlock::image(IMAGE, "image/png"),
                ),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ],
            _ => {
                return Err(ErrorData::invalid_params(
                    format!("no prompt named `{name}`; list the prompts to see their names"),
                    None,
                ));
            }
        };
        Ok(GetPromptResult::new(messages))
    }

    fn read(uri: &str) -> Result<ResourceContents, ErrorData> {
        let text = |mime: &str, text: String| ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime.to_owned()),
            text,
            meta: None,
        };
        if let Some(id) = uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
        {
            let data =
                json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
            return Ok(text("application/json", data.to_string()));
        }
        Ok(match uri {
            "test://static-text" => text(
                "text/plain",
                "This is the content of the static text resource.".to_owned(),
            ),
            "test://static-binary" => ResourceContents::BlobResourceContents {
                uri: uri.to_owned(),
                mime_type: Some("image/png".to_owned()),
                blob: IMAGE.to_owned(),
                meta: None,
            },
            "test://watched-resource" => text("text/plain", "Watched resource content".to_owned()),
            _ => {
                return Err(ErrorData::resource_not_found(
                    format!(
                        "no resource at `{uri}`; list the resources and templates to see what there is"
                    ),
                    None,
                ));
            }
        })
    }
}

impl ServerHandler for Fixtures {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(Self::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        Ok(Self::prompt(&request.name, &args)?.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resource = |uri: &str, name: &str, description: &str, mime: &str| {
            Resource::new(uri, name)
                .with_description(description)
                .with_mime_type(mime)
        };
        Ok(ListResourcesResult::with_all_items(vec![
            resource(
                "test://static-text",
                "static-text",
                "A static text resource",
                "text/plain",
            ),
            resource(
                "test://static-binary",
                "static-binary",
                "A static binary resource (a PNG)",
                "image/png",
            ),
            resource(
                "test://watched-resource",
                "watched-resource",
                "A resource to subscribe to",
                "text/plain",
            ),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new("test://template/{id}/data", "template-data")
            .with_description("Data for the id in the URI")
            .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(ReadResourceResult::new(vec![Self::read(&request.uri)?]).into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&request.uri);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let candidates: &[&str] = match &request.r#ref {
            Reference::Prompt(_) => &["paris", "park", "party"],
            _ => &["1", "2", "3"],
        };
        let prefix = request.argument.value.as_str();
        let values: Vec<String> = candidates
            .iter()
            .filter(|c| c.starts_with(prefix))
            .map(|c| (*c).to_owned())
            .collect();
        let info = CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let dir = tempfile::tempdir()?;
    let db = cli.db.unwrap_or_else(|| dir.path().join("conformance.db"));
    let runtime = Runtime::builder(Registry::collect()?)
        .store(SqliteStore::open(&db)?)
        .build()?;
    runtime.recover().await?;
    let server = McpServer::new(runtime)
        .name("toolwright-conformance")
        .compose(Fixtures::default());
    let handle = McpHttp::new(server).bind(cli.addr).start().await?;
    println!("listening on http://{}/mcp", handle.addr());
    handle.wait().await;
    Ok(())
}
