//! The strict parser, tested on its own.

use super::*;
use serde_json::json;

fn problems(text: &str) -> Vec<(String, String)> {
    parse_arguments("t", text)
        .unwrap_err()
        .problems
        .into_iter()
        .map(|p| (p.pointer, p.message))
        .collect()
}

fn only_problem(text: &str) -> (String, String) {
    let mut all = problems(text);
    assert_eq!(all.len(), 1, "{text}: {all:?}");
    all.remove(0)
}

#[test]
fn empty_whitespace_and_null_are_an_empty_object() {
    for text in ["", " ", "\n\t\r ", "null", " null\n"] {
        assert_eq!(parse_arguments("t", text).unwrap(), json!({}), "{text:?}");
    }
}

#[test]
fn duplicate_keys_are_reported_at_their_object() {
    assert_eq!(
        only_problem(r#"{"limit": 1, "limit": 2}"#),
        (
            String::new(),
            "duplicate key `limit` in the top-level object; send each key once".to_owned()
        )
    );
    // Escapes are decoded before keys are compared; `~` and `/` are escaped in pointers.
    assert_eq!(
        only_problem(r#"{"a/b": [0, {"x~": {"k": 1, "\u006b": 2}}]}"#),
        (
            "/a~1b/1/x~0".to_owned(),
            "duplicate key `k` in the object at /a~1b/1/x~0; send each key once".to_owned()
        )
    );
    // A key sent three times is one problem; different keys and objects are each reported.
    let all = problems(r#"{"a": 1, "a": 2, "a": 3, "b": {"c": 1, "c": 1}, "b": 0}"#);
    let pointers: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(pointers, ["", "/b", ""], "{all:?}");
    // The same key in sibling objects is fine.
    parse_arguments("t", r#"{"a": {"k": 1}, "b": {"k": 1}, "k": [{"k": 0}]}"#).unwrap();
}

#[test]
fn integers_must_fit_64_bits() {
    for text in [
        "18446744073709551615",
        "-9223372036854775808",
        "9007199254740993",
    ] {
        let value = parse_arguments("t", &format!("[{text}]")).unwrap();
        assert_eq!(value[0].to_string(), text);
    }
    for text in [
        "18446744073709551616",
        "-9223372036854775809",
        "100000000000000000000",
    ] {
        let (pointer, message) = only_problem(&format!(r#"{{"n": [1, {text}]}}"#));
        assert_eq!(pointer, "/n/1");
        assert!(
            message.starts_with(&format!("the integer {text} is outside the 64-bit range")),
            "{message}"
        );
    }
    // An integer that overflows even an f64 gets the same message.
    let huge = format!("1{}", "0".repeat(400));
    let (pointer, message) = only_problem(&format!(r#"{{"n": {huge}}}"#));
    assert_eq!(pointer, "/n");
    assert!(message.starts_with("the integer 1000"), "{message}");
    assert!(message.contains("… (201 more characters)"), "{message}");
    // `-0` is an exact float.
    assert_eq!(parse_arguments("t", "-0").unwrap().to_string(), "-0.0");
}

#[test]
fn decimals_must_be_the_shortest_form_of_their_float() {
    // An f64 whose two nearest 16-digit decimals are equally near (written as a sum: as a
    // literal it has more digits than its shortest form).
    let tie = 649_428_297_495_764.0 + 0.25;
    assert_eq!(format!("{tie}"), "649428297495764.3");
    assert_eq!(serde_json::to_string(&tie).unwrap(), "649428297495764.2");
    for (text, expected) in [
        ("1e2", 100.0),
        ("100.0", 100.0),
        ("0.5", 0.5),
        ("1.25e-3", 0.00125),
        ("0.1", 0.1),
        ("0.30000000000000004", 0.1 + 0.2),
        ("-2.50E+00", -2.5),
        ("0.0", 0.0),
        ("-0.0e7", -0.0),
        ("0e400", 0.0),
        ("1.7976931348623157e308", f64::MAX),
        ("5e-324", 5e-324),
        ("0.000100", 1e-4),
        // A tie: Rust prints `.3`, serde_json and JavaScript print `.2`.
        ("649428297495764.2", tie),
        ("649428297495764.3", tie),
        // Exact binary values are accepted too, however long.
        ("649428297495764.25", tie),
        (
            "0.1000000000000000055511151231257827021181583404541015625",
            0.1,
        ),
        ("9007199254740993e-16", 0.9007199254740993),
        ("1e05", 1e5),
    ] {
        let value = parse_arguments("t", &format!("[{text}]")).unwrap();
        assert_eq!(value[0].as_f64(), Some(expected), "{text}");
    }
    for (text, becomes) in [
        ("9007199254740993.0", "9007199254740992.0"),
        ("0.1000000000000000055511151231257827", "0.1"),
        ("1e-400", "0.0"),
        ("123456789012345678.0", "1.2345678901234568e17"),
        ("649428297495764.26", "649428297495764.3"),
        (
            "0.10000000000000000555111512312578270211815834045410156",
            "0.1",
        ),
    ] {
        let (pointer, message) = only_problem(&format!(r#"{{"x": {text}}}"#));
        assert_eq!(pointer, "/x");
        assert_eq!(
            message,
            format!(
                "the number {text} cannot be represented exactly as a 64-bit float: it would \
                 become {becomes}; send {becomes}, or the value as a string if every digit \
                 matters"
            )
        );
    }
    let (pointer, message) = only_problem(r#"{"x": [1e400]}"#);
    assert_eq!(pointer, "/x/0");
    assert_eq!(
        message,
        "the number 1e400 is too large for a 64-bit float (the largest is about 1.8e308); \
         send a smaller number"
    );
}

#[test]
fn numbers_inside_strings_and_keys_are_not_numbers() {
    let text = r#"{"1e400": "9007199254740993.0 \" -18446744073709551616 \\", "k\"2": 0.5}"#;
    assert_eq!(
        parse_arguments("t", text).unwrap(),
        serde_json::from_str::<Value>(text).unwrap()
    );
}

#[test]
fn every_problem_found_is_listed() {
    let all = problems(r#"{"a": 1e-400, "a": 1, "b": 1.00000000000000001}"#);
    let pointers: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(pointers, ["/a", "", "/b"], "{all:?}");
    let many = format!("[{}]", vec!["1e-999"; 30].join(","));
    let all = problems(&many);
    assert_eq!(all.len(), MAX_PROBLEMS + 1);
    assert_eq!(all[MAX_PROBLEMS].1, "10 more problems not listed");
}

#[test]
fn syntax_errors_point_where_parsing_stopped() {
    let (pointer, message) = only_problem(r#"{"a": {"b": [1, 2"#);
    assert_eq!(pointer, "/a/b");
    assert!(
        message.starts_with("the arguments end too early (EOF"),
        "{message}"
    );
    for (text, at, serde_says) in [
        (r#"{"a" 1e400}"#, "", "expected `:`"),
        (r#"{"a": [1 2]}"#, "/a", "expected `,` or `]`"),
        (r#"{"a": [1,]}"#, "/a", "trailing comma"),
        (r#"{"a": {"b": nul}}"#, "/a/b", "expected ident"),
        (r#"{"a": {"b": "x}}"#, "/a/b", "EOF while parsing a string"),
        (r#"{"a": {1: 2}}"#, "/a", "key must be a string"),
        (r#"{"a": -}"#, "/a", "invalid number"),
        (r#"{"a": 01}"#, "/a", "invalid number"),
        (r#"[1.e5]"#, "/0", "invalid number"),
    ] {
        let (pointer, message) = only_problem(text);
        assert_eq!(pointer, at, "{text}: {message}");
        assert!(message.contains(serde_says), "{text}: {message}");
    }
    // Problems found before the error are kept.
    let all = problems(r#"{"a": 1, "a": 2, "b": tru}"#);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[1].0, "/b");
    assert!(
        all[1].1.starts_with("the arguments are not valid JSON"),
        "{all:?}"
    );
}

#[test]
fn trailing_text_is_rejected() {
    for text in ["{} {}", "{}x", "1 2", "{\"a\": 1}}", "null,"] {
        let (pointer, message) = only_problem(text);
        assert_eq!(pointer, "");
        assert!(
            message.starts_with("unexpected text after the end of the JSON value at line 1"),
            "{message}"
        );
    }
}

#[test]
fn strings_are_checked_by_serde_json() {
    // Lone surrogates, raw control characters and bad escapes are serde_json's own errors
    // (its wording for a lone high surrogate is "unexpected end of hex escape").
    for (text, serde_says) in [
        (
            r#"{"s": "\ud800"}"#,
            "unexpected end of hex escape at line 1 column 14",
        ),
        (r#"{"s": "\ud800x"}"#, "unexpected end of hex escape"),
        (r#"{"\ud800": 1}"#, "unexpected end of hex escape"),
        (
            r#"{"s": "\udc00x"}"#,
            "lone leading surrogate in hex escape",
        ),
        (
            r#"{"s": "\ud800\u0041"}"#,
            "lone leading surrogate in hex escape",
        ),
        (
            r#"{"s": "\ud800\ud800"}"#,
            "lone leading surrogate in hex escape",
        ),
        (
            "{\"s\": \"a\u{1}b\"}",
            "control character (\\u0000-\\u001F)",
        ),
        ("{\"s\": \"a\nb\"}", "control character (\\u0000-\\u001F)"),
        ("{\"a\": \u{0}}", "expected value"),
        (r#"{"s": "\q"}"#, "invalid escape"),
        ("\u{b}{}", "expected value"),
        ("\u{feff}{}", "expected value"),
    ] {
        let (_, message) = only_problem(text);
        assert!(
            message.starts_with("the arguments are not valid JSON (")
                && message.contains(serde_says),
            "{text:?}: {message}"
        );
    }
    // A valid pair, and escaped control characters (they are data), are fine.
    assert_eq!(
        parse_arguments("t", r#"{"s": "\ud83d\ude00\u0001\n"}"#).unwrap(),
        json!({ "s": "😀\u{1}\n" })
    );
}

#[test]
fn nesting_is_limited_below_serde_json() {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    parse_arguments("t", &nested(MAX_DEPTH)).unwrap();
    let (pointer, message) = only_problem(&nested(MAX_DEPTH + 1));
    assert_eq!(pointer, format!("{}", "/0".repeat(MAX_DEPTH)));
    assert_eq!(
        message,
        "arrays and objects nest more than 100 levels deep here; send flatter arguments"
    );
    let objects = format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200));
    let (pointer, _) = only_problem(&objects);
    assert_eq!(pointer, "/a".repeat(MAX_DEPTH));
    // serde_json's own limit: 127 containers parse, the 128th does not.
    assert!(serde_json::from_str::<Value>(&nested(127)).is_ok());
    let error = serde_json::from_str::<Value>(&nested(128)).unwrap_err();
    assert!(error.to_string().starts_with("recursion limit exceeded"));
}

#[test]
fn size_is_limited() {
    let exact = format!("\"{}\"", "x".repeat(MAX_ARGUMENT_BYTES - 2));
    assert!(parse_arguments("t", &exact).is_ok());
    let over = format!("{exact} ");
    let (pointer, message) = only_problem(&over);
    assert_eq!(pointer, "");
    assert_eq!(
        message,
        "the arguments are 4194305 bytes, more than the limit of 4194304 bytes; send less \
         data, or pass large content by reference"
    );
}

#[test]
fn messages_render_through_input_error() {
    let err = parse_arguments("read_logs", r#"{"limit": 5, "limit": 500}"#).unwrap_err();
    assert_eq!(err.tool, "read_logs");
    assert_eq!(
        err.to_string(),
        "invalid input for `read_logs`:\n- (root): duplicate key `limit` in the top-level \
         object; send each key once\nfix these fields and call `read_logs` again"
    );
}

#[test]
fn decimal_normalization() {
    let same = |a: &str, b: &str| {
        Decimal::parse(a)
            .unwrap()
            .same_value(&Decimal::parse(b).unwrap())
    };
    assert!(same("1e2", "100"));
    assert!(same("100.000", "1e2"));
    assert!(same("0.00125", "1.25e-3"));
    assert!(same("0", "-0.0e5"));
    assert!(!same("1", "-1"));
    assert!(!same("1", "10"));
    assert!(!same("0.1", "0.10000000000000001"));
    for bad in ["", "-", "1.", ".1", "1e", "1e+", "+1", "1x", "--1", "1.2.3"] {
        assert!(Decimal::parse(bad).is_none(), "{bad:?}");
    }
}

#[test]
fn the_number_scan_skips_strings() {
    let text = br#"["a\"1", "\\", -2, {"3": 4.5e6}]"#;
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some((start, end)) = next_number_token(text, from) {
        spans.push(std::str::from_utf8(&text[start..end]).unwrap());
        from = end;
    }
    assert_eq!(spans, ["-2", "4.5e6"]);
    // Unterminated strings and escapes at the end do not panic.
    assert_eq!(next_number_token(br#""abc\"#, 0), None);
    assert_eq!(next_number_token(br#"""#, 0), None);
}

#[test]
fn integers_before_a_number_checked_later_are_passed_over() {
    // Integers are not scanned when read; the scan passes over them when a float or a failure
    // needs it, and must land on the right token.
    let (pointer, message) =
        only_problem(r#"{"a": 1, "b": [2, "3", -4], "c": {"d": 5}, "e": 9007199254740993.0}"#);
    assert_eq!(pointer, "/e");
    assert!(message.contains("9007199254740993.0"), "{message}");
    let (pointer, message) = only_problem(r#"{"a": 1, "b": [2, 30], "c": 1e400}"#);
    assert_eq!(pointer, "/c");
    assert!(
        message.contains("too large for a 64-bit float"),
        "{message}"
    );
    let (pointer, message) = only_problem(r#"[1, 2, 3, 18446744073709551616]"#);
    assert_eq!(pointer, "/3");
    assert!(message.contains("18446744073709551616"), "{message}");
    assert_eq!(
        parse_arguments("t", r#"{"a": 1, "b": 2.5, "c": 3, "d": 0.1}"#).unwrap(),
        json!({ "a": 1, "b": 2.5, "c": 3, "d": 0.1 })
    );
}
