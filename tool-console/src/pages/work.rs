//! The pages of the work the runtime keeps: sessions, turns with their timeline, tasks,
//! journals, the tool catalog and remote connections.

use maud::{Markup, html};
use toolwright_core::{Catalog, CatalogEntry};
use toolwright_runtime::{Page, SessionSummary, TaskSummary, TurnSummary};

use super::{
    Frame, badge, json_block, layout, name_of, next_link, query_value, request_card, segment,
    who_or_dash,
};
use crate::RecentEvent;
use crate::views::{CallView, ConnectionView, JournalView, SessionView, TaskView, TurnView};

fn turn_link(frame: &Frame<'_>, id: &str) -> Markup {
    html! { a href=(frame.link(&format!("/turns/{}", segment(id)))) { code { (id) } } }
}

fn task_link(frame: &Frame<'_>, id: &str) -> Markup {
    html! { a href=(frame.link(&format!("/tasks/{}", segment(id)))) { code { (id) } } }
}

fn session_link(frame: &Frame<'_>, id: &str) -> Markup {
    html! { a href=(frame.link(&format!("/sessions/{}", segment(id)))) { code { (id) } } }
}

fn journal_link(frame: &Frame<'_>, run_id: &str) -> Markup {
    let path: Vec<String> = run_id.split('/').map(segment).collect();
    html! { a href=(frame.link(&format!("/journals/{}", path.join("/")))) { code { (run_id) } } }
}

fn when(ms: Option<u64>) -> String {
    ms.map_or_else(|| "—".to_owned(), super::time)
}

/// The sessions page.
pub(crate) fn sessions(
    frame: &Frame<'_>,
    page: &Page<SessionSummary>,
    next: Option<String>,
) -> Markup {
    layout(
        frame,
        "Sessions",
        html! {
            table {
                thead { tr { th { "Session" } th { "Version" } th { "Last write" } } }
                tbody {
                    @for s in &page.items {
                        tr { td { (session_link(frame, &s.id)) } td { (s.version) } td { (when(s.updated_ms)) } }
                    }
                }
            }
            (next_link(next))
        },
    )
}

fn turn_rows(frame: &Frame<'_>, turns: &[TurnSummary]) -> Markup {
    html! {
        table {
            thead { tr { th { "Turn" } th { "Session" } th { "Status" } th { "Version" } } }
            tbody {
                @for t in turns {
                    tr {
                        td { (turn_link(frame, &t.id)) }
                        td { (session_link(frame, &t.session_id)) }
                        td { (badge(&name_of(&t.status))) }
                        td { (t.version) }
                    }
                }
            }
        }
    }
}

fn task_rows(frame: &Frame<'_>, tasks: &[TaskSummary]) -> Markup {
    html! {
        table {
            thead { tr { th { "Task" } th { "Session" } th { "Status" } th { "Version" } } }
            tbody {
                @for t in tasks {
                    tr {
                        td { (task_link(frame, &t.id)) }
                        td { (session_link(frame, &t.session_id)) }
                        td { (badge(&name_of(&t.status))) }
                        td { (t.version) }
                    }
                }
            }
        }
    }
}

/// One session's page.
pub(crate) fn session(frame: &Frame<'_>, view: &SessionView, next: Option<String>) -> Markup {
    layout(
        frame,
        &format!("Session {}", view.id),
        html! {
            table {
                tr { th { "Opened by" } td { (who_or_dash(view.initiator.as_ref())) } }
                tr { th { "Parent" } td { @if let Some(p) = &view.parent { (session_link(frame, p)) } @else { "—" } } }
                tr { th { "Interactive" } td { (view.interactive) } }
                tr { th { "Ended" } td { (view.ended) } }
                @if let Some(tools) = &view.tools { tr { th { "Tools" } td { (tools.join(", ")) } } }
            }
            h2 { "Turns" }
            (turn_rows(frame, &view.turns.items))
            h2 { "Tasks" }
            (task_rows(frame, &view.tasks.items))
            (next_link(next))
        },
    )
}

/// The turns page, with a status filter.
pub(crate) fn turns(
    frame: &Frame<'_>,
    page: &Page<TurnSummary>,
    status: Option<&str>,
    next: Option<String>,
) -> Markup {
    let statuses = ["active", "waiting", "running", "completed", "cancelled"];
    layout(
        frame,
        "Turns",
        html! {
            nav.pages {
                "Status: "
                a href=(frame.link("/turns")) { "any" }
                @for s in statuses {
                    " · "
                    @if status == Some(s) { strong { (s) } }
                    @else { a href=(frame.link(&format!("/turns?status={s}"))) { (s) } }
                }
            }
            (turn_rows(frame, &page.items))
            (next_link(next))
        },
    )
}

/// The tasks page.
pub(crate) fn tasks(
    frame: &Frame<'_>,
    page: &Page<TaskSummary>,
    open: bool,
    next: Option<String>,
) -> Markup {
    layout(
        frame,
        "Tasks",
        html! {
            nav.pages {
                @if open { strong { "open" } " · " a href=(frame.link("/tasks")) { "all" } }
                @else { a href=(frame.link("/tasks?open=1")) { "open" } " · " strong { "all" } }
            }
            (task_rows(frame, &page.items))
            (next_link(next))
        },
    )
}

fn call_entry(frame: &Frame<'_>, call: &CallView) -> Markup {
    html! {
        div.entry.call data-call=(call.call_id) {
            strong { "Step " (call.step + 1) ": " code { (call.tool) } }
            " (call " code { (call.call_id) } ") " (badge(call.state))
            @if let Some(by) = &call.approved_by { " approved by " (super::who(by)) }
            @if let Some(request) = &call.request_id {
                " waits on " a href=(frame.link(&format!("/requests/{}", segment(request)))) { "request " code { (request) } }
            }
            @if let Some(until) = call.sleeps_until { " until " (super::time(until)) }
            @if let Some(journal) = &call.journal { " · journal " (journal_link(frame, journal)) }
            @if let Some(input) = &call.input {
                details { summary { "Input" } (json_block(input)) }
            }
            @if let Some(result) = &call.result {
                @let label = if result.is_error { "error" } else { "result" };
                div.result {
                    (badge(label))
                    @if let Some(error) = &result.error {
                        " " code { (error.code().as_str()) } " " (error.message())
                        @if error.code() == toolwright_core::ErrorCode::ResultUnknown {
                            p.muted { "A stop cut this call while it ran: its side effects may have happened, so it is never run again." }
                        }
                    }
                    (json_block(&result.output))
                }
            }
        }
    }
}

/// One turn's page: its record, then its timeline (calls, requests, journals) and the events
/// this process saw.
pub(crate) fn turn(
    frame: &Frame<'_>,
    view: &TurnView,
    events: &[RecentEvent],
    next: Option<String>,
) -> Markup {
    let open = !matches!(name_of(&view.status).as_str(), "completed" | "cancelled");
    layout(
        frame,
        &format!("Turn {}", view.id),
        html! {
            table {
                tr { th { "Status" } td { (badge(&name_of(&view.status))) } }
                tr { th { "Session" } td { (session_link(frame, &view.session_id)) } }
                tr { th { "Caller" } td { (name_of(&view.caller)) } }
                tr { th { "Acting for" } td { (who_or_dash(view.current.as_ref())) } }
                tr { th { "Tainted by" } td.taint {
                    @if let Some(source) = &view.tainted_by { "output of " code { (source) } " (its write calls need approval)" }
                    @else { "—" }
                } }
                tr { th { "Steps" } td { (view.steps) } }
            }
            @if open {
                form.act method="post" action=(frame.link(&format!("/turns/{}/cancel", segment(&view.id)))) {
                    (frame.csrf_field())
                    button.deny type="submit" { "Cancel this turn" }
                }
            }
            h2 { "Timeline" }
            div.timeline {
                @if view.calls.is_empty() && view.requests.is_empty() { p.muted { "No step recorded yet." } }
                @for call in &view.calls { (call_entry(frame, call)) }
                @for request in &view.requests { (request_card(frame, request)) }
            }
            @if let Some(next) = next {
                nav.pages { a href=(next) rel="next" { "Later steps →" } }
            }
            @if !view.tasks.is_empty() {
                h2 { "Tasks it started" }
                (task_rows(frame, &view.tasks))
            }
            @if view.withheld {
                p.muted { "A request of this turn is not yours to see: its call's input and journal, and the turn's messages and events, are left out." }
            }
            @if !view.messages.is_empty() {
                h2 { "Messages of this turn" }
                p.muted { "The conversation the agent loop keeps: the model's messages, its calls and their results, in order." }
                ol.messages {
                    @for m in &view.messages {
                        li value=(m.position) { (json_block(&m.message)) }
                    }
                }
            }
            @for journal in &view.journals {
                h2 { "Journal " code { (journal.run_id) } }
                (journal_table(journal))
            }
            h2 { "Events seen by this console" }
            @if events.is_empty() {
                p.muted { "None: the events of turns run by another process are not kept; the records above are." }
            } @else {
                ol.events {
                    @for e in events {
                        li { (super::time(e.at_ms)) " " strong { (name_of(&e.event)) } }
                    }
                }
            }
        },
    )
}

fn journal_table(journal: &JournalView) -> Markup {
    html! {
        @if journal.withheld { p.muted { "A request of its call is not yours to see: its entries, which hold what answered it, are left out." } }
        @else if journal.entries.is_empty() { p.muted { "No entries." } }
        @else {
            table.journal {
                thead { tr { th { "#" } th { "Kind" } th { "Name" } th { "Value" } } }
                tbody {
                    @for e in &journal.entries {
                        tr { td { (e.position) } td { (name_of(&e.kind)) } td { code { (e.name) } } td { (json_block(&e.value)) } }
                    }
                }
            }
            p.muted { "A run that starts again replays these entries instead of running their steps again." }
        }
    }
}

/// A journal's page.
pub(crate) fn journal(frame: &Frame<'_>, view: &JournalView) -> Markup {
    layout(
        frame,
        &format!("Journal {}", view.run_id),
        journal_table(view),
    )
}

/// One task's page.
pub(crate) fn task(frame: &Frame<'_>, view: &TaskView) -> Markup {
    let open = !view.status.is_over();
    layout(
        frame,
        &format!("Task {}", view.id),
        html! {
            table {
                tr { th { "Tool" } td { code { (view.tool) } } }
                tr { th { "Status" } td { (badge(&name_of(&view.status))) " " (view.status.describe())
                    @if view.cancel_requested { " (cancel requested)" } } }
                tr { th { "Turn" } td { (turn_link(frame, &view.turn_id)) } }
                tr { th { "Session" } td { (session_link(frame, &view.session_id)) } }
                tr { th { "Acting for" } td { (who_or_dash(view.current.as_ref())) } }
            }
            @if open {
                form.act method="post" action=(frame.link(&format!("/tasks/{}/cancel", segment(&view.id)))) {
                    (frame.csrf_field())
                    button.deny type="submit" { "Cancel this task" }
                    span.muted { "Its body gets the runtime's cleanup window; its questions are revoked." }
                }
            }
            h2 { "Calls" }
            div.timeline { @for call in &view.calls { (call_entry(frame, call)) } }
            h2 { "Questions" }
            @if view.requests.is_empty() { p.muted { "None." } }
            @for request in &view.requests { (request_card(frame, request)) }
            h2 { "Journal " code { (view.journal.run_id) } }
            (journal_table(&view.journal))
        },
    )
}

fn tool_row(frame: &Frame<'_>, tool: &CatalogEntry, query: &str) -> Markup {
    html! {
        tr {
            td { a href=(frame.link(&format!("/tools/{}{query}", segment(&tool.name)))) { code { (tool.name) } } }
            td { (tool.texts.title.as_deref().unwrap_or("—")) }
            td { (tool.texts.summary.as_deref().unwrap_or("")) }
            td { (name_of(&tool.effect)) }
            td { (name_of(&tool.approval)) }
            td { (visibility(&tool.visibility)) }
            td { (tool.toolset.as_deref().unwrap_or("—")) }
        }
    }
}

/// A tool's visibility flags in words (`user only, deferred`), or a dash.
fn visibility(v: &toolwright_core::Visibility) -> String {
    let flags: Vec<&str> = [
        (v.user_only, "user only"),
        (v.deferred, "deferred"),
        (v.conditional, "conditional"),
        (v.withheld, "withheld"),
        (!v.subagents, "not for subagents"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if flags.is_empty() {
        "—".to_owned()
    } else {
        flags.join(", ")
    }
}

/// The tool catalog for one audience and locale.
pub(crate) fn tools(frame: &Frame<'_>, catalog: &Catalog, audience: &str, locale: &str) -> Markup {
    let query = format!("?audience={audience}&locale={}", query_value(locale));
    layout(
        frame,
        "Tools",
        html! {
            form.act method="get" action=(frame.link("/tools")) {
                label { "Audience "
                    select name="audience" {
                        @for a in ["model", "subagent", "user"] {
                            option value=(a) selected[a == audience] { (a) }
                        }
                    }
                }
                label { "Locale " input type="text" name="locale" value=(locale) size="8"; }
                button type="submit" { "Show" }
            }
            table {
                thead { tr { th { "Tool" } th { "Title" } th { "Summary" } th { "Effect" } th { "Approval" } th { "Visibility" } th { "Toolset" } } }
                tbody { @for tool in catalog.entries() { (tool_row(frame, tool, &query)) } }
            }
        },
    )
}

/// One tool's review page: what the plugin SDK's review page shows before install.
pub(crate) fn tool(frame: &Frame<'_>, tool: &CatalogEntry) -> Markup {
    layout(
        frame,
        tool.texts.title.as_deref().unwrap_or(&tool.name),
        html! {
            @if let Some(summary) = &tool.texts.summary { p { (summary) } }
            table {
                tr { th { "Name" } td { code { (tool.name) } } }
                tr { th { "Id" } td { code { (tool.id) } } }
                tr { th { "Effect" } td { (name_of(&tool.effect)) } }
                tr { th { "Approval" } td { (name_of(&tool.approval)) } }
                tr { th { "Kind" } td { (name_of(&tool.kind)) } }
                tr { th { "Toolset" } td { (tool.toolset.as_deref().unwrap_or("—")) } }
                tr { th { "Locale" } td { (tool.texts.locale.as_deref().unwrap_or("—")) } }
            }
            h2 { "Visibility" } (json_block(&tool.visibility))
            h2 { "Origin" } (json_block(&tool.origin))
            h2 { "Input schema" } (json_block(&tool.input_schema))
            @if let Some(output) = &tool.output_schema { h2 { "Output schema" } (json_block(output)) }
        },
    )
}

/// The remote connections page, with each withheld tool's change and its approve form.
pub(crate) fn connections(frame: &Frame<'_>, views: &[ConnectionView]) -> Markup {
    layout(
        frame,
        "Connections",
        html! {
            @if views.is_empty() { p.muted { "This runtime declares no remote connection." } }
            @for c in views {
                article.card {
                    h3 { code { (c.name) } " " (badge(&name_of(&c.state))) }
                    @if let Some(error) = c.state_error() { p.error { (error) } }
                    p { "Tools: " (c.tools.join(", ")) }
                    @for (tool, why) in &c.unavailable { p.muted { code { (tool) } " unavailable: " (why) } }
                    @for w in &c.withheld {
                        div.card {
                            strong { "Withheld: " code { (w.name) } }
                            " — its server changed its definition since it was approved."
                            @if let Some(change) = &w.change {
                                details open { summary { "Pinned → listed now" } (json_block(change)) }
                            }
                            form.act method="post" action=(frame.link("/connections/approve")) {
                                (frame.csrf_field())
                                input type="hidden" name="tool" value=(w.name);
                                button.approve type="submit" { "Approve the new definition" }
                            }
                        }
                    }
                    h4 { "Pinned definitions" }
                    table {
                        thead { tr { th { "Tool" } th { "Digest" } th { "Approved by" } th { "Pinned at" } } }
                        tbody {
                            @for pin in &c.pins {
                                tr { td { code { (pin.tool) } } td { code { (pin.digest) } } td { (who_or_dash(pin.approved_by.as_ref())) } td { (super::time(pin.pinned_at_ms)) } }
                            }
                        }
                    }
                }
            }
        },
    )
}
