//! Attachments through the model loop, on every wire: a file a tool returned reaches the
//! provider in its wire's file form in every request that carries the result (the same bytes,
//! read back from the store, in later rounds and later turns), while the stored conversation
//! keeps only the reference.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::agent::{
    Agent, AgentOutcome, Anthropic, ChatCompletions, LoopbackProvider, Reply, Responses, Wire,
};
use toolwright::prelude::*;
use toolwright::runtime::attachments::id_of;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore};

use crate::support::{alice, builder};

/// The picture: bytes that are no text.
fn picture() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..=255u8).rev());
    bytes
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PlotArgs {
    /// What to plot.
    metric: String,
}

fn plotted(output: &ModelOutput) -> ModelOutput {
    output.clone()
}

/// Plots a metric as a PNG.
#[tool(effect = read, to_model_output = plotted)]
async fn plot_metric(args: PlotArgs) -> ModelOutput {
    ModelOutput::content([
        ContentPart::text(format!("The {} plot:", args.metric)),
        ContentPart::file(STANDARD.encode(picture()), "image/png"),
    ])
}

/// An agent on `runtime` asking the provider at `base_url` over `wire`.
pub(crate) fn agent(wire: Wire, runtime: Runtime, base_url: String) -> Agent {
    match wire {
        Wire::ChatCompletions => Agent::new(
            runtime,
            ChatCompletions::new("plotter")
                .base_url(base_url)
                .api_key("sk-loopback"),
        ),
        Wire::Responses => Agent::new(
            runtime,
            Responses::new("plotter")
                .base_url(base_url)
                .api_key("sk-loopback"),
        ),
        Wire::Anthropic => Agent::new(
            runtime,
            Anthropic::new("plotter")
                .base_url(base_url)
                .api_key("sk-ant-loopback"),
        ),
        other => panic!("no adapter for {other} yet"),
    }
}

#[tokio::test]
async fn a_returned_file_reaches_the_provider_every_round_while_the_conversation_keeps_its_id() {
    let base64 = STANDARD.encode(picture());
    let id = id_of(&picture());
    for wire in Wire::ALL {
        let provider = LoopbackProvider::start(
            wire,
            [
                Reply::call("plot_metric", json!({ "metric": "latency" })),
                Reply::text("Latency is flat."),
                Reply::text("Still flat."),
            ],
        )
        .await
        .expect("the loopback provider starts");
        let dir = tempfile::tempdir().unwrap();
        let runtime = builder([plot_metric::TOOL])
            .store(SqliteStore::open(dir.path().join("agent.db")).unwrap())
            .build()
            .unwrap();
        let session = runtime
            .open_session(SessionSpec::new("plots").initiator(alice()))
            .await
            .unwrap();
        let agent = agent(wire, runtime.clone(), provider.base_url());
        let first = agent
            .send(&session, Some(alice()), "plot latency")
            .await
            .unwrap();
        assert!(
            matches!(first.outcome, AgentOutcome::Answered(_)),
            "{wire}: {first:?}"
        );
        // A later turn, a new run of the loop: the file is read back from the store.
        let second = agent
            .send(&session, Some(alice()), "and now?")
            .await
            .unwrap();
        assert!(
            matches!(second.outcome, AgentOutcome::Answered(_)),
            "{wire}: {second:?}"
        );

        let requests = provider.requests();
        assert_eq!(requests.len(), 3, "{wire}");
        assert!(
            !requests[0].to_string().contains(&base64),
            "{wire}: no file yet"
        );
        for (round, request) in requests.iter().enumerate().skip(1) {
            let body = request.to_string();
            assert_eq!(
                body.matches(&base64).count(),
                1,
                "{wire}: request {round} carries the file once: {body}"
            );
            assert!(
                !body.contains("sha256:"),
                "{wire}: no reference reaches the provider"
            );
        }
        let stored = runtime.store().conversation("plots").await.unwrap();
        let stored = serde_json::to_string(&stored).unwrap();
        assert!(
            stored.contains(&id),
            "{wire}: the conversation names the attachment"
        );
        assert!(
            !stored.contains(&base64),
            "{wire}: the conversation holds no bytes"
        );
    }
}
