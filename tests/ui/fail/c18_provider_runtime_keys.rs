use toolwright::prelude::*;

fn shorten(output: &serde_json::Value) -> String {
    output.to_string()
}

/// Runs Python in the provider's sandbox.
#[tool(
    provider,
    effect = write,
    workflow = execute,
    durable,
    approval = always,
    approval_key = input,
    ends_turn,
    input_retries = 2,
    user_only,
    label(start = "Running code"),
    output_schema,
    to_model_output = shorten,
    annotations(read_only = false)
)]
fn code_execution() -> ProviderTool {
    ProviderTool::code_execution()
}

fn main() {}
