//! Report tools from the eve seed: `generate_report` streams partial snapshots with activity
//! labels (4.8), `export_report` is deferred, found through `tool_search` (4.6).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ReportArgs {
    /// Project to report on, e.g. storefront.
    #[schemars(regex(pattern = r"^[a-z0-9-]{1,48}$"))]
    project: String,
}

#[derive(Clone, Serialize, JsonSchema)]
struct Section {
    title: String,
    body: String,
}

#[derive(Serialize, JsonSchema)]
struct Report {
    /// Pass it to `export_report` for a PDF.
    report_id: String,
    project: String,
    sections: Vec<Section>,
}

#[derive(Serialize)]
struct Progress<'a> {
    phase: &'a str,
    sections: &'a [Section],
}

/// Writes a status report for one project: delivery, open risks and next milestones. Use when the
/// user asks how a project is going or wants a report to share. Not for a single metric or a
/// service's health. Returns the report's sections and a `report_id` for `export_report`.
#[tool(
    effect = read,
    label(
        start = "Writing the {project} report",
        delta = report_phase,
        complete = report_done,
    ),
    output_schema,
)]
async fn generate_report(args: ReportArgs, ctx: ToolContext) -> Result<Report, ToolError> {
    ctx.partial(&Progress {
        phase: "collecting sources",
        sections: &[],
    });
    let sections = vec![
        Section {
            title: "Delivery".to_owned(),
            body: format!("{}: 14 of 17 milestone issues closed.", args.project),
        },
        Section {
            title: "Risks".to_owned(),
            body: "Payment provider migration slips one week.".to_owned(),
        },
        Section {
            title: "Next".to_owned(),
            body: "Checkout redesign beta on 2026-03-28.".to_owned(),
        },
    ];
    ctx.partial(&Progress {
        phase: "writing",
        sections: &sections,
    });
    Ok(Report {
        report_id: format!("rpt_{}", args.project),
        project: args.project,
        sections,
    })
}

fn report_phase(_: &ReportArgs, partial: &serde_json::Value) -> String {
    partial["phase"].as_str().unwrap_or_default().to_owned()
}

fn report_done(_: &ReportArgs, report: &Report) -> String {
    format!("Report ready: {} sections", report.sections.len())
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ExportArgs {
    /// The report to export, as returned by `generate_report`, e.g. rpt_storefront.
    #[schemars(regex(pattern = r"^rpt_[a-z0-9-]{1,48}$"))]
    report_id: String,
}

#[derive(Serialize, JsonSchema)]
struct Exported {
    report_id: String,
    /// Where the PDF was written.
    path: String,
    media_type: String,
    pages: u32,
}

/// Exports a finished report as a PDF file. Use only when the user asks for a PDF, a download or a
/// file to share; to show a report in the chat, use `generate_report`'s result. Returns the PDF's
/// path and page count.
#[tool(effect = write, deferred, title = "Export report as PDF", output_schema)]
async fn export_report(args: ExportArgs) -> Result<Exported, ToolError> {
    Ok(Exported {
        path: format!("reports/{}.pdf", args.report_id),
        report_id: args.report_id,
        media_type: "application/pdf".to_owned(),
        pages: 3,
    })
}
