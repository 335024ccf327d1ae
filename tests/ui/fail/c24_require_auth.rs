use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    repo: String,
}

/// Grant access to a repository; `never` asks nobody, so nobody's token is checked.
#[tool(effect = write, approval(request = never, require_auth = "github"))]
async fn grant_never(args: Args) -> String {
    args.repo
}

/// Grant access to a repository; a provider is a name.
#[tool(effect = write, approval(request = always, require_auth = "git hub"))]
async fn grant_spaced(args: Args) -> String {
    args.repo
}

/// Grant access to a repository; an empty provider names nothing.
#[tool(effect = write, approval(request = always, require_auth = ""))]
async fn grant_empty(args: Args) -> String {
    args.repo
}

/// Grant access to a repository; the provider is a string literal.
#[tool(effect = write, approval(request = always, require_auth = github))]
async fn grant_path(args: Args) -> String {
    args.repo
}

/// Grant access to a repository; without a request policy nobody is asked.
#[tool(effect = write, approval(require_auth = "github"))]
async fn grant_unasked(args: Args) -> String {
    args.repo
}

fn main() {}
