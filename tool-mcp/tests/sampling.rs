//! The model handle over MCP sampling, against rmcp's own client in process: what a tool's ask
//! becomes in `sampling/createMessage` (messages, system prompt, token limit, the result schema,
//! tools only for clients that declared `sampling.tools`), the reply it gets back, the inner
//! session's tool calls, the 2026-07-28 re-run through input-required results, and the error a
//! client without sampling gets.

// rmcp marks sampling deprecated (SEP-2577); the revisions served here still define it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, JsonObject, ProtocolVersion, Role,
    SamplingCapability, SamplingMessage, SamplingMessageContentBlock,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::Registry;
use toolwright::model::{ModelBackend, ModelReply, ModelRequest};
use toolwright::prelude::*;
use toolwright::runtime::{Options, Runtime, SqliteStore};
use toolwright_mcp::McpServer;

static SUMMARY_STARTS: AtomicUsize = AtomicUsize::new(0);
static SUMMARY_SENT: AtomicUsize = AtomicUsize::new(0);
/// The words `lookup` looked up, by every test (each looks up words of its own: the tests run
/// at once).
static LOOKUPS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How many times `lookup` looked `word` up.
fn lookups(word: &str) -> usize {
    LOOKUPS
        .lock()
        .unwrap()
        .iter()
        .filter(|w| *w == word)
        .count()
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TextArgs {
    text: String,
}

/// Summarizes a text with the client's model.
#[tool(effect = read)]
async fn summarize(args: TextArgs, ctx: ToolContext) -> Result<String, ToolError> {
    ctx.model()
        .prompt(format!("Summarize: {}", args.text))
        .system("Be brief.")
        .max_tokens(120)
        .temperature(0.5)
        .stop("END")
        .text()
        .await
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Verdict {
    spam: bool,
    /// Why, in a few words.
    reason: String,
}

/// Classifies a comment with the client's model.
#[tool(effect = read)]
async fn classify(args: TextArgs, ctx: ToolContext) -> Result<String, ToolError> {
    let verdict: Verdict = ctx
        .model()
        .prompt(format!("Is this spam? {}", args.text))
        .result()
        .await?;
    Ok(format!("spam={} ({})", verdict.spam, verdict.reason))
}

/// Looks a word up (offered to the model inside `research`).
#[tool(effect = read)]
async fn lookup(args: TextArgs) -> String {
    LOOKUPS.lock().unwrap().push(args.text.clone());
    format!("{} means a small rodent", args.text)
}

/// Researches a word with the client's model, which may look words up.
#[tool(effect = read)]
async fn research(args: TextArgs, ctx: ToolContext) -> Result<String, ToolError> {
    ctx.model()
        .prompt(format!("What is a {}?", args.text))
        .tools(["lookup"])
        .text()
        .await
}

/// Asks the model twice, then sends the summary (a side effect after every ask).
#[tool(effect = write)]
async fn summary_mail(args: TextArgs, ctx: ToolContext) -> Result<String, ToolError> {
    SUMMARY_STARTS.fetch_add(1, Ordering::SeqCst);
    let first = ctx
        .model()
        .prompt(format!("Summarize: {}", args.text))
        .text()
        .await?;
    let title = ctx
        .model()
        .prompt(format!("Title for: {first}"))
        .text()
        .await?;
    SUMMARY_SENT.fetch_add(1, Ordering::SeqCst);
    Ok(format!("sent \"{title}\": {first}"))
}

fn registry() -> Registry {
    Registry::from_tools([
        summarize::TOOL,
        classify::TOOL,
        lookup::TOOL,
        research::TOOL,
        summary_mail::TOOL,
    ])
    .unwrap()
}

fn runtime() -> Runtime {
    Runtime::builder(registry())
        .store(SqliteStore::in_memory().unwrap())
        .build()
        .unwrap()
}

/// A client whose "model" answers from the request alone: `Summary of <text>` for a summary,
/// JSON for a classification, a `lookup` call and then its result for research.
#[derive(Clone, Default)]
struct Client {
    sampling: bool,
    tools: bool,
    asked: Arc<Mutex<Vec<CreateMessageRequestParams>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        let mut capabilities = ClientCapabilities::default();
        if self.sampling {
            let mut sampling = SamplingCapability::default();
            sampling.tools = self.tools.then(JsonObject::new);
            capabilities.sampling = Some(sampling);
        }
        config.capabilities = capabilities;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asked.lock().unwrap().push(params.clone());
        Ok(answer(&params))
    }
}

/// The text of `message`'s text blocks.
fn text_of(message: &SamplingMessage) -> String {
    message
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn answer(params: &CreateMessageRequestParams) -> CreateMessageResult {
    let last = params.messages.last().unwrap();
    let reply = |text: String| {
        CreateMessageResult::new(SamplingMessage::assistant_text(text), "fake-model-1".into())
            .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN)
    };
    if let Some(result) = last.content.iter().find_map(|c| c.as_tool_result()) {
        let said = serde_json::to_value(&result.content).unwrap()[0]["text"].clone();
        return reply(format!("From the dictionary: {}", said.as_str().unwrap()));
    }
    let prompt = text_of(last);
    if params.tools.is_some() {
        let word = prompt
            .trim_start_matches("What is a ")
            .trim_end_matches('?');
        let call = SamplingMessageContentBlock::tool_use(
            "use-1",
            "lookup",
            json!({ "text": word }).as_object().unwrap().clone(),
        );
        return CreateMessageResult::new(
            SamplingMessage::new(Role::Assistant, call),
            "fake-model-1".into(),
        )
        .with_stop_reason(CreateMessageResult::STOP_REASON_TOOL_USE);
    }
    if prompt.starts_with("Is this spam?") {
        return reply("```json\n{\"spam\": true, \"reason\": \"sells watches\"}\n```".into());
    }
    if let Some(title) = prompt.strip_prefix("Title for: ") {
        return reply(format!("About {}", title.len()));
    }
    reply(format!(
        "Summary of {}",
        prompt.trim_start_matches("Summarize: ")
    ))
}

async fn connect(
    server: McpServer,
    client: Client,
    version: Option<ProtocolVersion>,
) -> RunningService<RoleClient, Client> {
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    match version {
        None => client.serve(b).await.unwrap(),
        Some(version) => rmcp::service::serve_client_with_lifecycle(
            client,
            b,
            rmcp::service::ClientLifecycleMode::Discover {
                preferred_versions: vec![version],
            },
        )
        .await
        .unwrap(),
    }
}

fn call(tool: &str, text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned())
        .with_arguments(json!({ "text": text }).as_object().unwrap().clone())
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_2025_11_25_client_is_asked_with_create_message_and_the_request_is_mapped() {
    let client = Client {
        sampling: true,
        ..Client::default()
    };
    let asked = client.asked.clone();
    let client = connect(McpServer::new(runtime()), client, None).await;

    let result = client
        .call_tool(call("summarize", "a long text"))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(text(&result), "Summary of a long text");
    let request = asked.lock().unwrap()[0].clone();
    let wire = serde_json::to_value(&request).unwrap();
    assert_eq!(
        wire,
        json!({
            "messages": [{ "role": "user", "content": { "type": "text", "text": "Summarize: a long text" } }],
            "systemPrompt": "Be brief.",
            "maxTokens": 120,
            "temperature": 0.5,
            "stopSequences": ["END"],
        })
    );

    // A structured result: the schema goes into the system prompt, the fenced JSON answer is
    // checked and read.
    let result = client
        .call_tool(call("classify", "buy watches"))
        .await
        .unwrap();
    assert_eq!(text(&result), "spam=true (sells watches)");
    let request = asked.lock().unwrap()[1].clone();
    let system = request.system_prompt.unwrap();
    assert!(
        system.starts_with(
            "Answer with one JSON value that matches this JSON Schema, and nothing else:\n"
        ),
        "{system}"
    );
    let schema: Value = serde_json::from_str(system.split_once('\n').unwrap().1).unwrap();
    assert_eq!(schema["required"], json!(["spam", "reason"]));
    assert_eq!(request.max_tokens, 1024);

    // Tools for a client that did not declare `sampling.tools`: refused by name, nothing asked.
    let result = client.call_tool(call("research", "vole")).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        text(&result),
        "the model was asked to use tools (`lookup`), and this MCP client did not declare `sampling.tools`, so its model cannot be offered tools; ask without `.tools(..)`, or use a client that supports tools in sampling"
    );
    assert_eq!(asked.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn tools_in_the_models_session_run_through_the_runtime_for_clients_that_declare_them() {
    let client = Client {
        sampling: true,
        tools: true,
        ..Client::default()
    };
    let asked = client.asked.clone();
    let client = connect(McpServer::new(runtime()), client, None).await;
    let result = client.call_tool(call("research", "vole")).await.unwrap();
    assert_eq!(
        text(&result),
        "From the dictionary: vole means a small rodent"
    );
    assert_eq!(lookups("vole"), 1);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    // The tool's MCP definition was offered, and the second round carries the call and its
    // result.
    let tools = asked[0].tools.as_ref().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "lookup");
    assert!(tools[0].input_schema.contains_key("properties"));
    let second = serde_json::to_value(&asked[1].messages).unwrap();
    assert_eq!(second[1]["role"], "assistant");
    assert_eq!(second[1]["content"]["type"], "tool_use");
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(second[2]["content"][0]["toolUseId"], "use-1");
    assert_eq!(second[2]["content"][0]["isError"], false);
}

// The asking call holds one of the runtime's places for concurrent calls while the client's
// model uses tools: with one place, the tool's call waited for it until the asking call timed
// out. It gives its place up while they run, as a subagent's call does.
#[tokio::test]
async fn tools_in_the_models_session_run_when_the_asking_call_holds_the_only_place() {
    let runtime = Runtime::builder(registry())
        .store(SqliteStore::in_memory().unwrap())
        .options(Options {
            concurrency: 1,
            call_timeout: Duration::from_secs(20),
            ..Options::default()
        })
        .build()
        .unwrap();
    let client = Client {
        sampling: true,
        tools: true,
        ..Client::default()
    };
    let client = connect(McpServer::new(runtime), client, None).await;
    let result = client.call_tool(call("research", "mole")).await.unwrap();
    assert_eq!(
        text(&result),
        "From the dictionary: mole means a small rodent"
    );
    assert_eq!(lookups("mole"), 1);
}

#[tokio::test]
async fn a_client_without_sampling_gets_an_error_saying_so_and_what_to_do() {
    for version in [None, Some(ProtocolVersion::V_2026_07_28)] {
        let client = connect(McpServer::new(runtime()), Client::default(), version).await;
        let result = client.call_tool(call("summarize", "text")).await.unwrap();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            text(&result),
            "this tool asks a model, and this MCP client supports no sampling (it declared no `sampling` capability), so it cannot lend its model; call the tool from a client that supports sampling, or have the server's operator install a model on the runtime"
        );
    }
}

/// A model the runtime has of its own.
struct House;

impl ModelBackend for House {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> futures_util::future::BoxFuture<'_, Result<ModelReply, ToolError>> {
        let said = request.messages[0].text.clone();
        Box::pin(async move { Ok(ModelReply::new("house", format!("house: {said}"))) })
    }
}

#[tokio::test]
async fn the_runtimes_own_model_answers_when_the_client_cannot_and_the_clients_wins_when_it_can() {
    let runtime = Runtime::builder(registry())
        .store(SqliteStore::in_memory().unwrap())
        .model(House)
        .build()
        .unwrap();
    let server = McpServer::new(runtime);
    let plain = connect(server.for_new_session(), Client::default(), None).await;
    let result = plain.call_tool(call("summarize", "x")).await.unwrap();
    assert_eq!(text(&result), "house: Summarize: x");
    let sampling = Client {
        sampling: true,
        ..Client::default()
    };
    let sampling = connect(server.for_new_session(), sampling, None).await;
    let result = sampling.call_tool(call("summarize", "x")).await.unwrap();
    assert_eq!(text(&result), "Summary of x");
}

#[tokio::test]
async fn a_2026_07_28_client_answers_through_input_required_results_and_the_call_runs_again() {
    let client = Client {
        sampling: true,
        tools: true,
        ..Client::default()
    };
    let asked = client.asked.clone();
    let client = connect(
        McpServer::new(runtime()),
        client,
        Some(ProtocolVersion::V_2026_07_28),
    )
    .await;

    // rmcp's client fulfils each input request with its handler and calls again.
    let result = client
        .call_tool(call("summarize", "the report"))
        .await
        .unwrap();
    assert_eq!(text(&result), "Summary of the report");
    let result = client.call_tool(call("classify", "watches")).await.unwrap();
    assert_eq!(text(&result), "spam=true (sells watches)");
    // The inner session's tool ran once, though the call ran twice (its result is sealed
    // into the request state with the model's answer).
    let result = client.call_tool(call("research", "shrew")).await.unwrap();
    assert_eq!(
        text(&result),
        "From the dictionary: shrew means a small rodent"
    );
    assert_eq!(lookups("shrew"), 1);

    // Two asks: the call runs three times (no answer, one, both), the side effect after the
    // asks once, and the client sees only the last attempt's result.
    let (starts, sent) = (
        SUMMARY_STARTS.load(Ordering::SeqCst),
        SUMMARY_SENT.load(Ordering::SeqCst),
    );
    asked.lock().unwrap().clear();
    let result = client.call_tool(call("summary_mail", "q3")).await.unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), "sent \"About 13\": Summary of q3");
    assert_eq!(SUMMARY_STARTS.load(Ordering::SeqCst), starts + 3);
    assert_eq!(SUMMARY_SENT.load(Ordering::SeqCst), sent + 1);
    assert_eq!(asked.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_sampling_request_state_is_checked_before_its_answer_is_used() {
    let client = Client {
        sampling: true,
        ..Client::default()
    };
    let client = connect(
        McpServer::new(runtime()),
        client,
        Some(ProtocolVersion::V_2026_07_28),
    )
    .await;
    let response = client
        .call_tool_once(call("summarize", "draft"))
        .await
        .unwrap();
    let CallToolResponse::InputRequired(required) = response else {
        panic!("expected an input-required result, got {response:?}");
    };
    let requests = required.input_requests.unwrap();
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(key, "sampling-1");
    let request = serde_json::to_value(request).unwrap();
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(request["params"]["systemPrompt"], "Be brief.");
    assert_eq!(request["params"]["maxTokens"], 120);
    let state = required.request_state.unwrap();
    let answer = json!({
        "role": "assistant",
        "content": { "type": "text", "text": "A draft." },
        "model": "by-hand",
    });

    // The same state with other arguments is another call.
    let other = client
        .call_tool_once(
            call("summarize", "something else")
                .with_request_state(state.clone())
                .with_input_responses([(key.clone(), answer.clone())].into()),
        )
        .await
        .unwrap_err();
    assert!(
        other.to_string().contains("belongs to another call"),
        "{other}"
    );
    // Without the answer, the retry says which key it needs.
    let missing = client
        .call_tool_once(call("summarize", "draft").with_request_state(state.clone()))
        .await
        .unwrap_err();
    assert!(missing.to_string().contains("`sampling-1`"), "{missing}");
    // With it, the call completes with the answer.
    let done = client
        .call_tool_once(
            call("summarize", "draft")
                .with_request_state(state)
                .with_input_responses([(key.clone(), answer)].into()),
        )
        .await
        .unwrap();
    let CallToolResponse::Complete(done) = done else {
        panic!("expected a result, got {done:?}");
    };
    assert_eq!(text(&done), "A draft.");
}

/// The official TypeScript SDKs' clients (`tests/mcp-clients/node/sampling.mjs`, installed by
/// `scripts/setup-clients`) against this server over HTTP: `v1` on 2025-11-25, `v2` on
/// 2026-07-28; `nosampling` declares no sampling. What the script printed, by key.
async fn node_client(url: &str, sdk: &str, mode: &str) -> serde_json::Map<String, Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp-clients/node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/client")
            .exists()
            && dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "the TypeScript MCP SDKs are not installed; run `scripts/setup-clients`"
    );
    let output = tokio::process::Command::new("node")
        .arg(dir.join("sampling.mjs"))
        .args([sdk, url, mode])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the {sdk} client failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Map<String, Value>>(line).ok())
        .flatten()
        .collect()
}

#[tokio::test]
async fn the_typescript_sdks_lend_their_model_on_both_revisions() {
    let handle = toolwright_mcp::McpHttp::new(McpServer::new(runtime()))
        .start()
        .await
        .unwrap();
    let url = format!("http://{}/mcp", handle.addr());
    for (sdk, protocol) in [("v1", "2025-11-25"), ("v2", "2026-07-28")] {
        let found = node_client(&url, sdk, "sampling").await;
        assert_eq!(found["protocol"], protocol);
        let summary = &found["summary"];
        assert_eq!(summary["isError"], false, "{sdk}: {summary}");
        assert_eq!(summary["content"][0]["text"], "Summary of the Q3 report");
        let verdict = &found["verdict"];
        assert_eq!(verdict["isError"], false, "{sdk}: {verdict}");
        assert_eq!(verdict["content"][0]["text"], "spam=true (sells watches)");
        // What the client's model was asked: the prompt, the system prompt and the limit; for
        // the structured result, the schema in the system prompt.
        let asked = found["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 2, "{sdk}: {asked:?}");
        assert_eq!(asked[0]["systemPrompt"], "Be brief.");
        assert_eq!(asked[0]["maxTokens"], 120);
        assert_eq!(
            asked[0]["messages"],
            json!([{ "role": "user", "content": { "type": "text", "text": "Summarize: the Q3 report" } }])
        );
        let system = asked[1]["systemPrompt"].as_str().unwrap();
        assert!(system.contains("\"spam\""), "{sdk}: {system}");

        let found = node_client(&url, sdk, "nosampling").await;
        let summary = &found["summary"];
        assert_eq!(summary["isError"], true, "{sdk}: {summary}");
        let message = summary["content"][0]["text"].as_str().unwrap();
        assert!(
            message.contains("this MCP client supports no sampling")
                && message.contains("call the tool from a client that supports sampling"),
            "{sdk}: {message}"
        );
    }
    handle.shutdown().await;
}
