//! The fn's doc comment as the tool's description.

use super::*;

/// The doc comment of the fn, as the description: lines joined, one leading space removed from
/// each, blank lines at both ends dropped.
pub(crate) fn doc_comment(attrs: &[syn::Attribute]) -> Option<(String, Span)> {
    let mut lines = Vec::new();
    let mut span = None;
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            span.get_or_insert(attr.span());
            let text = s.value();
            for line in text.lines() {
                lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
            }
        }
    }
    let text = reflow(&lines);
    (!text.is_empty()).then(|| (text, span.unwrap_or_else(Span::call_site)))
}

/// Joins the lines of a doc comment the way a reader sees them: lines wrapped within a paragraph
/// become one line (a model should not see mid-sentence breaks), blank lines separate paragraphs,
/// and list items, indented code and fenced code keep their own lines.
pub(crate) fn reflow(lines: &[String]) -> String {
    let mut out = String::new();
    let mut in_fence = false;
    let mut previous_blank = true;
    for line in lines {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```");
        if trimmed.is_empty() && !in_fence {
            if !previous_blank {
                out.push_str("\n\n");
            }
            previous_blank = true;
            continue;
        }
        let keeps_own_line = in_fence
            || fence
            || line.starts_with("    ")
            || trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !previous_blank {
            out.push(if keeps_own_line { '\n' } else { ' ' });
        }
        out.push_str(if in_fence || line.starts_with("    ") {
            line
        } else {
            trimmed
        });
        if fence {
            in_fence = !in_fence;
        }
        previous_blank = false;
    }
    out.trim().to_owned()
}
