//! `cargo run -p toolwright-public-api -- [check|overwrite|print]`: compares the facade's public
//! surface with the committed list (the default), rewrites the list, or prints it. See the
//! library's docs for what the list holds.

use std::process::ExitCode;

use toolwright_public_api::{Mode, run, surface, target_dir, workspace_root};

fn main() -> ExitCode {
    let arg = std::env::args().nth(1);
    let mode = match arg.as_deref() {
        None | Some("check") => Mode::Check,
        Some("overwrite") => Mode::Overwrite,
        Some("print") => {
            let root = workspace_root();
            return match surface(&root, &target_dir(&root)) {
                Ok(surface) => {
                    for line in &surface.lines {
                        println!("{line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::FAILURE
                }
            };
        }
        Some(other) => {
            eprintln!("unknown mode `{other}`: check, overwrite or print");
            return ExitCode::from(2);
        }
    };
    match run(mode) {
        Ok(report) => {
            eprint!("{}", report.notes());
            eprint!("{report}");
            if report.written {
                eprintln!(
                    "wrote {} lines to {}",
                    report.surface.lines.len(),
                    toolwright_public_api::LIST_FILE
                );
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
