//! A [`CallResult`]'s JSON: `model` is written only for a projection (a tool's own, a failed
//! call's message); left out, the model saw the output. A step's record, its history row and
//! its events would otherwise carry every output twice. Results written before carry `model`
//! always: one equal to the output reads back as no projection.
//!
//! Both directions go through a mirror of the struct built by destructuring every field, so a
//! field added to `CallResult` does not compile until it is handled here.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use toolwright_core::{ModelOutput, ModelUsage, ToolError};

use super::CallResult;

/// What is written.
#[derive(Serialize)]
struct Written<'a> {
    call_id: &'a str,
    tool: &'a str,
    is_error: bool,
    output: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a ModelOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ToolError>,
    ends_turn: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_usage: Option<&'a ModelUsage>,
}

/// What is read: results written before `model` could be left out have it.
#[derive(Deserialize)]
struct Read {
    call_id: String,
    tool: String,
    is_error: bool,
    output: Value,
    #[serde(default)]
    model: Option<ModelOutput>,
    #[serde(default)]
    error: Option<ToolError>,
    #[serde(default)]
    ends_turn: bool,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    model_usage: Option<ModelUsage>,
}

impl Serialize for CallResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let CallResult {
            call_id,
            tool,
            is_error,
            output,
            projection,
            error,
            ends_turn,
            label,
            model_usage,
        } = self;
        Written {
            call_id,
            tool,
            is_error: *is_error,
            output,
            model: projection.as_ref(),
            error: error.as_ref(),
            ends_turn: *ends_turn,
            label: label.as_deref(),
            model_usage: model_usage.as_ref(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CallResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Read {
            call_id,
            tool,
            is_error,
            output,
            model,
            error,
            ends_turn,
            label,
            model_usage,
        } = Read::deserialize(deserializer)?;
        let mut result = CallResult {
            call_id,
            tool,
            is_error,
            projection: None,
            output,
            error,
            ends_turn,
            label,
            model_usage,
        };
        if let Some(model) = model {
            result.set_model(model);
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(projection: Option<ModelOutput>) -> CallResult {
        CallResult {
            call_id: "c1".into(),
            tool: "read_logs".into(),
            is_error: false,
            output: json!({ "lines": ["a \"quoted\" line"], "truncated": false }),
            projection,
            error: None,
            ends_turn: true,
            label: Some("Read".into()),
            model_usage: None,
        }
    }

    #[test]
    fn the_output_the_model_saw_is_written_once() {
        let plain = result(None);
        let json = serde_json::to_value(&plain).unwrap();
        assert_eq!(
            json,
            json!({
                "call_id": "c1", "tool": "read_logs", "is_error": false,
                "output": { "lines": ["a \"quoted\" line"], "truncated": false },
                "ends_turn": true, "label": "Read",
            })
        );
        let back: CallResult = serde_json::from_value(json).unwrap();
        assert_eq!(back, plain);
    }

    #[test]
    fn a_projection_is_written_beside_the_output() {
        for model in [
            ModelOutput::Text("2 lines".into()),
            ModelOutput::Json(json!({ "lines": 1 })),
        ] {
            let projected = result(Some(model.clone()));
            let json = serde_json::to_value(&projected).unwrap();
            assert_eq!(json["model"], serde_json::to_value(&model).unwrap());
            let back: CallResult = serde_json::from_str(&json.to_string()).unwrap();
            assert_eq!(back, projected);
        }
    }

    #[test]
    fn results_written_with_their_model_read_as_before() {
        // A failed call's model is its message, not its output: written as it always was.
        let failed = CallResult::failed("c1", "t", ToolError::new("no"));
        let json = serde_json::to_value(&failed).unwrap();
        assert_eq!(json["model"], json!({ "type": "text", "value": "no" }));
        let read: CallResult = serde_json::from_value(json).unwrap();
        assert_eq!(read, failed);
        let same = json!({
            "call_id": "c1", "tool": "t", "is_error": false, "output": [1, 2],
            "model": { "type": "json", "value": [1, 2] }, "ends_turn": false,
        });
        let read: CallResult = serde_json::from_value(same.clone()).unwrap();
        assert_eq!(
            read.projection, None,
            "a model equal to the output is no projection"
        );
        assert_eq!(*read.model(), ModelOutput::Json(json!([1, 2])));
        // Written again, the copy goes.
        let mut expected = same;
        expected.as_object_mut().unwrap().remove("model");
        assert_eq!(serde_json::to_value(&read).unwrap(), expected);
    }
}
