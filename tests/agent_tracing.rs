//! The spans of the model loop: each model request is a `chat` span shaped after the
//! OpenTelemetry GenAI conventions, inside the run's `invoke_agent` span, beside the runtime's
//! `step` spans. A binary of its own: the subscriber that records the spans is the process's
//! global one (a thread-scoped subscriber misses callsites other tests' threads reach first).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::Principal;
use toolwright::agent::{Agent, Reply, ScriptedModel};
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore};

/// How many times `tally` ran.
#[derive(Clone, Default)]
struct Tally(Arc<AtomicUsize>);

#[derive(Deserialize, JsonSchema, ToolInput)]
struct TallyArgs {
    /// What to count.
    item: String,
}

/// Counts an item.
#[tool(effect = read)]
async fn tally(args: TallyArgs, tally: State<Tally>) -> Result<String, ToolError> {
    let n = tally.0.0.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("{} counted ({n})", args.item))
}

/// The spans a test saw: name, parent's name, and the fields recorded on each.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<SpanSeen>>>);

#[derive(Clone, Debug)]
struct SpanSeen {
    name: &'static str,
    parent: Option<&'static str>,
    fields: std::collections::BTreeMap<String, String>,
}

struct Fields<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S> tracing_subscriber::Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = std::collections::BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.name());
        let mut seen = self.0.lock().unwrap();
        let index = seen.len();
        seen.push(SpanSeen {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(index);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let Some(index) = ctx
            .span(id)
            .and_then(|s| s.extensions().get::<usize>().copied())
        else {
            return;
        };
        values.record(&mut Fields(&mut self.0.lock().unwrap()[index].fields));
    }
}

#[tokio::test]
async fn each_model_request_has_a_gen_ai_span_inside_the_run_beside_its_steps() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(spans.clone()))
        .expect("the only subscriber of this binary");
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::builder(Registry::from_tools([tally::TOOL]).unwrap())
        .store(SqliteStore::open(dir.path().join("agent.db")).unwrap())
        .state(Tally::default())
        .build()
        .unwrap();
    let alice = Principal::user("test", "alice");
    let session = runtime
        .open_session(SessionSpec::new("traced").initiator(alice.clone()))
        .await
        .unwrap();
    let model = ScriptedModel::new([
        Reply::call("tally", json!({ "item": "a" })),
        Reply::text("counted"),
    ]);
    let agent = Agent::new(runtime.clone(), model);
    agent.send(&session, Some(alice), "count").await.unwrap();

    let seen = spans.0.lock().unwrap().clone();
    let run = seen
        .iter()
        .find(|s| s.name == "invoke_agent")
        .expect("a span for the run");
    assert_eq!(run.fields["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run.fields["gen_ai.conversation.id"], "traced");
    assert!(run.fields.contains_key("turn_id"), "{:?}", run.fields);
    let chats: Vec<&SpanSeen> = seen.iter().filter(|s| s.name == "chat").collect();
    assert_eq!(chats.len(), 2, "one per model request");
    for chat in &chats {
        assert_eq!(chat.parent, Some("invoke_agent"));
        let f = &chat.fields;
        assert_eq!(f["otel.name"], "chat scripted");
        assert_eq!(f["gen_ai.operation.name"], "chat");
        assert_eq!(f["gen_ai.provider.name"], "scripted");
        assert_eq!(f["gen_ai.request.model"], "scripted");
        assert_eq!(f["gen_ai.response.model"], "scripted");
        assert_eq!(f["gen_ai.usage.input_tokens"], "10");
        assert_eq!(f["gen_ai.usage.output_tokens"], "5");
        assert!(f.contains_key("gen_ai.response.id"), "{f:?}");
    }
    assert_eq!(
        chats[0].fields["gen_ai.response.finish_reasons"],
        "tool_calls"
    );
    assert_eq!(chats[1].fields["gen_ai.response.finish_reasons"], "stop");
    let step = seen.iter().find(|s| s.name == "step").expect("a step span");
    assert_eq!(
        step.parent,
        Some("invoke_agent"),
        "the runtime's step is in the run"
    );
    let call = seen
        .iter()
        .find(|s| s.name == "tool_call")
        .expect("a call span");
    assert_eq!(call.fields["tool"], "tally");
}
