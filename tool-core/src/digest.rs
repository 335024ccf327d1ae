//! Digests of JSON values that do not depend on key order: what `approval_key = input` grants,
//! remote definition pins and durable ids are keyed by.

use serde_json::Value;

/// A hex SHA-256 digest of the canonical JSON of `value`: compact, object keys sorted at every
/// level, so `{"a":1,"b":2}` and `{"b":2,"a":1}` have the same digest.
pub fn input_digest(value: &Value) -> String {
    use sha2::Digest;
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    let digest = sha2::Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `value` as compact JSON with sorted object keys. Sorting here instead of relying on
/// `serde_json::Map` being a `BTreeMap`: any crate in the program can enable serde_json's
/// `preserve_order` feature, which makes the map keep insertion order, and features unify.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let mut out = String::new();
        write_canonical(
            &json!({ "b": [ { "z": 1, "a": null } ], "a": "x\"y", "c": 1.5 }),
            &mut out,
        );
        assert_eq!(out, r#"{"a":"x\"y","b":[{"a":null,"z":1}],"c":1.5}"#);
        assert_eq!(
            input_digest(&json!({ "amount": 500, "to": "acct-1" })),
            "9b4ecaf278f99a53cf31770e2761ec89e08b9cad3a0aadf7a51886cdcebe65ae"
        );
    }
}
