use toolwright::prelude::*;

struct Args {
    service: String,
}

/// Restart a service.
#[tool(effect = write, label(start = "Restarting {service}"))]
async fn restart(args: Args) -> String {
    args.service
}

fn main() {}
