//! `auto(instructions = "...", criteria(clear = "...", caution = "..."), model = "...")`: what
//! the `auto` decider is told about a tool. Every part is optional; each is a non-empty string,
//! given once, and `criteria(...)` names at least one of its two parts.

use syn::ExprCall;

use super::values::single_ident;
use super::*;

const PARTS: [&str; 3] = ["instructions", "criteria", "model"];
const CRITERIA: [&str; 2] = ["clear", "caution"];

/// What `auto(...)` says, each part as its literal (for spans and expansion).
#[derive(Clone, Default)]
pub(crate) struct Auto {
    pub(crate) instructions: Option<LitStr>,
    pub(crate) clear: Option<LitStr>,
    pub(crate) caution: Option<LitStr>,
    pub(crate) model: Option<LitStr>,
}

/// The form each part is written in, for messages that say what to write.
fn form(part: &str) -> &'static str {
    match part {
        "instructions" => "instructions = \"Decide whether this refund needs a finance review.\"",
        "model" => "model = \"small\"",
        "clear" => "clear = \"Refunds under 50 EUR.\"",
        "caution" => "caution = \"Anything else.\"",
        _ => "criteria(clear = \"...\", caution = \"...\")",
    }
}

/// Parses the arguments of `auto(...)`. Problems are reported in `cx`; the parts that parsed are
/// kept so the rest of the attribute is still checked.
pub(super) fn parse_auto(call: &ExprCall, cx: &mut Ctxt) -> Auto {
    let mut auto = Auto::default();
    let mut seen: Vec<String> = Vec::new();
    for arg in &call.args {
        let Some((key, value)) = part(arg, "auto", &PARTS, cx) else {
            continue;
        };
        let name = key.to_string();
        if seen.contains(&name) {
            cx.error_spanned(
                key,
                format!("`{name}` is given twice in `auto(...)`; keep one"),
            );
            continue;
        }
        seen.push(name.clone());
        match (name.as_str(), value) {
            ("criteria", Value::Group(args)) => parse_criteria(key, args, &mut auto, cx),
            ("criteria", _) => cx.error_spanned(
                key,
                format!(
                    "`criteria` takes its parts in parentheses: `{}`",
                    form("criteria")
                ),
            ),
            (_, Value::Group(_)) => {
                cx.error_spanned(key, format!("`{name}` takes a string: `{}`", form(&name)))
            }
            ("instructions", Value::Expr(expr)) => auto.instructions = text(&name, expr, cx),
            (_, Value::Expr(expr)) => auto.model = text(&name, expr, cx),
            (_, Value::Missing) => {
                cx.error_spanned(key, format!("`{name}` needs a value: `{}`", form(&name)))
            }
        }
    }
    auto
}

fn parse_criteria(
    key: &Ident,
    args: &syn::punctuated::Punctuated<Expr, Token![,]>,
    auto: &mut Auto,
    cx: &mut Ctxt,
) {
    let mut seen: Vec<String> = Vec::new();
    let mut any = false;
    for arg in args {
        let Some((part_key, value)) = part(arg, "criteria", &CRITERIA, cx) else {
            any = true; // reported; do not also say the group is empty
            continue;
        };
        any = true;
        let name = part_key.to_string();
        if seen.contains(&name) {
            cx.error_spanned(
                part_key,
                format!("`{name}` is given twice in `criteria(...)`; keep one"),
            );
            continue;
        }
        seen.push(name.clone());
        let parsed = match value {
            Value::Expr(expr) => text(&name, expr, cx),
            Value::Group(_) | Value::Missing => {
                cx.error_spanned(
                    part_key,
                    format!("`{name}` takes a string: `{}`", form(&name)),
                );
                None
            }
        };
        if name == "clear" {
            auto.clear = parsed;
        } else {
            auto.caution = parsed;
        }
    }
    if !any {
        cx.error_spanned(
            key,
            "`criteria(...)` is empty; say when a call may run without a person, when it needs one, or both: `criteria(clear = \"...\", caution = \"...\")`, or remove `criteria`",
        );
    }
}

/// The value of one part: `key = expr`, `key(...)`, or `key` alone.
enum Value<'a> {
    Expr(&'a Expr),
    Group(&'a syn::punctuated::Punctuated<Expr, Token![,]>),
    Missing,
}

/// The key of one argument of `group(...)` and its value, when the key is one of `known`; an
/// unknown key or an argument that is no key is reported here.
fn part<'a>(
    arg: &'a Expr,
    group: &str,
    known: &[&str],
    cx: &mut Ctxt,
) -> Option<(&'a Ident, Value<'a>)> {
    let (key, value) = match arg {
        Expr::Assign(assign) => (single_ident(&assign.left), Value::Expr(&assign.right)),
        Expr::Call(call) => (single_ident(&call.func), Value::Group(&call.args)),
        Expr::Path(_) => (single_ident(arg), Value::Missing),
        _ => (None, Value::Missing),
    };
    let list = known
        .iter()
        .map(|k| match *k {
            "criteria" => "`criteria(clear = \"...\", caution = \"...\")`".to_owned(),
            k => format!("`{k} = \"...\"`"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let Some(key) = key else {
        cx.error_spanned(arg, format!("`{group}(...)` takes named parts: {list}"));
        return None;
    };
    let name = key.to_string();
    if !known.contains(&name.as_str()) {
        let hint = suggest(
            &name,
            known.iter().copied(),
            &format!("`{group}(...)` takes {list}"),
        );
        cx.error_spanned(key, format!("unknown key `{name}` in `{group}(...)`{hint}"));
        return None;
    }
    Some((key, value))
}

/// A part's string: a literal that is not blank.
fn text(key: &str, expr: &Expr, cx: &mut Ctxt) -> Option<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) if lit.value().trim().is_empty() => {
            let what = match key {
                "instructions" => "what the decider is to judge",
                "model" => "the name of a model the host registered with its decider",
                "clear" => "when a call may run without a person",
                _ => "when a call needs a person",
            };
            cx.error_spanned(
                lit,
                format!("`{key}` is empty; write {what}, or remove `{key}`"),
            );
            None
        }
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit.clone()),
        other => {
            let message = match other {
                // `model = small`: the name, unquoted.
                Expr::Path(_)
                    if single_ident(other)
                        .is_some_and(|i| !i.to_string().chars().any(|c| c.is_uppercase())) =>
                {
                    let ident = single_ident(other)
                        .map(Ident::to_string)
                        .unwrap_or_default();
                    format!("`{key}` takes a string literal: `{key} = \"{ident}\"`")
                }
                Expr::Path(_) => format!(
                    "`{key}` takes a string literal, not a path (the macro cannot read a const's value): `{}`",
                    form(key)
                ),
                _ => format!("`{key}` takes a string literal: `{}`", form(key)),
            };
            cx.error_spanned(other, message);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Approval, parse_str};
    use super::*;

    fn auto_of(approval: Option<Approval>) -> Auto {
        match approval.and_then(|a| a.request) {
            Some((Policy::Auto(auto), _)) => *auto,
            _ => panic!("not an auto policy"),
        }
    }

    fn value(lit: &Option<LitStr>) -> Option<String> {
        lit.as_ref().map(LitStr::value)
    }

    #[test]
    fn every_part_parses_in_both_forms() {
        for src in [
            r#"effect = money, approval = auto(instructions = "i", criteria(clear = "ok", caution = "ask"), model = "small")"#,
            r#"effect = money, approval(request = auto(model = "small", criteria(caution = "ask", clear = "ok"), instructions = "i"), prompt = "Refund?")"#,
        ] {
            let (attrs, cx) = parse_str(src);
            assert!(!cx.has_errors(), "{src}: {:?}", cx.messages());
            let auto = auto_of(attrs.approval);
            assert_eq!(value(&auto.instructions).as_deref(), Some("i"));
            assert_eq!(value(&auto.clear).as_deref(), Some("ok"));
            assert_eq!(value(&auto.caution).as_deref(), Some("ask"));
            assert_eq!(value(&auto.model).as_deref(), Some("small"));
        }
    }

    #[test]
    fn every_part_is_optional() {
        for src in [
            "effect = write, approval = auto",
            "effect = write, approval = auto()",
            r#"effect = write, approval = auto(criteria(caution = "ask"))"#,
            r#"effect = write, approval = auto(model = "small")"#,
        ] {
            let (attrs, cx) = parse_str(src);
            assert!(!cx.has_errors(), "{src}: {:?}", cx.messages());
            let auto = auto_of(attrs.approval);
            assert!(auto.instructions.is_none() && auto.clear.is_none(), "{src}");
        }
    }

    #[test]
    fn unknown_parts_suggest_the_closest() {
        let (_, cx) = parse_str(
            r#"effect = write, approval = auto(instruction = "i", critera(clear = "c"), criteria(clera = "c"), temperature = "0")"#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(
            messages[0].contains("did you mean `instructions`"),
            "{messages:?}"
        );
        assert!(
            messages[1].contains("did you mean `criteria`"),
            "{messages:?}"
        );
        assert!(messages[2].contains("did you mean `clear`"), "{messages:?}");
        assert!(messages[3].contains("takes `instructions"), "{messages:?}");
    }

    #[test]
    fn duplicates_empty_strings_and_other_values_are_refused() {
        let (attrs, cx) = parse_str(
            r#"effect = write, approval = auto(model = "a", model = "b", instructions = "", criteria(), criteria(clear = 1, caution = "x", caution = "y"), model = small)"#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(
            messages[0].contains("`model` is given twice in `auto(...)`"),
            "{messages:?}"
        );
        assert!(
            messages[1].contains("`instructions` is empty"),
            "{messages:?}"
        );
        assert!(
            messages[2].contains("`criteria(...)` is empty"),
            "{messages:?}"
        );
        assert!(
            messages[3].contains("`criteria` is given twice"),
            "{messages:?}"
        );
        // A second `criteria` or `model` is not read, whatever it holds.
        assert!(
            messages[4].contains("`model` is given twice"),
            "{messages:?}"
        );
        let auto = auto_of(attrs.approval);
        assert_eq!(value(&auto.model).as_deref(), Some("a"));
    }

    #[test]
    fn values_that_are_not_strings_say_what_to_write() {
        let (_, cx) = parse_str(
            r#"effect = write, approval = auto(model = small, criteria = "x", instructions("i"), "text"), durabel"#,
        );
        let messages = cx.messages();
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(messages[0].contains(r#"`model = "small"`"#), "{messages:?}");
        assert!(messages[1].contains("in parentheses"), "{messages:?}");
        assert!(
            messages[2].contains("`instructions` takes a string"),
            "{messages:?}"
        );
        assert!(messages[3].contains("takes named parts"), "{messages:?}");
        // The rest of the attribute is still parsed.
        assert!(
            messages[4].contains("did you mean `durable`"),
            "{messages:?}"
        );
        let (_, cx) = parse_str(r#"effect = write, approval = auto(criteria(clear(1), caution))"#);
        let messages = cx.messages();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].contains("`clear` takes a string"),
            "{messages:?}"
        );
        assert!(
            messages[1].contains("`caution` takes a string"),
            "{messages:?}"
        );
    }
}
