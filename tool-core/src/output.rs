//! What a call produces: the raw output, the model's projection of it, and status objects.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the model sees of a tool's output, when `to_model_output` projects it.
///
/// Hooks, events and clients still receive the full raw output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum ModelOutput {
    /// Plain text.
    Text(String),
    /// A JSON value.
    Json(Value),
    /// A list of content parts (text, base64 files such as images and audio, embedded
    /// resources).
    Content(Vec<ContentPart>),
}

impl ModelOutput {
    /// Text output.
    pub fn text(text: impl Into<String>) -> Self {
        ModelOutput::Text(text.into())
    }

    /// JSON output.
    pub fn json(value: impl Serialize) -> Self {
        ModelOutput::Json(serde_json::to_value(value).unwrap_or(Value::Null))
    }

    /// Content parts.
    pub fn content(parts: impl IntoIterator<Item = ContentPart>) -> Self {
        ModelOutput::Content(parts.into_iter().collect())
    }

    /// This output as one text, for a message: [`Text`](ModelOutput::Text) as it is,
    /// [`Json`](ModelOutput::Json) as compact JSON, and [`Content`](ModelOutput::Content) as
    /// its parts one per line, a text part as its text, a file part as `[<media type> file]`
    /// (the data is not text) and a resource as its URI, then its text if it has one.
    ///
    /// ```
    /// use toolwright_core::{ContentPart, ModelOutput};
    /// let output = ModelOutput::content([
    ///     ContentPart::text("The chart:"),
    ///     ContentPart::file("iVBORw0KGgo=", "image/png"),
    /// ]);
    /// assert_eq!(output.to_text(), "The chart:\n[image/png file]");
    /// ```
    pub fn to_text(&self) -> String {
        match self {
            ModelOutput::Text(text) => text.clone(),
            ModelOutput::Json(value) => value.to_string(),
            ModelOutput::Content(parts) => parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text { text } => text.clone(),
                    ContentPart::File { media_type, .. }
                    | ContentPart::Attachment { media_type, .. } => format!("[{media_type} file]"),
                    ContentPart::Resource { uri, text, .. } => match text {
                        Some(text) => format!("[resource {uri}]\n{text}"),
                        None => format!("[resource {uri}]"),
                    },
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl From<String> for ModelOutput {
    fn from(text: String) -> Self {
        ModelOutput::Text(text)
    }
}

impl From<&str> for ModelOutput {
    fn from(text: &str) -> Self {
        ModelOutput::Text(text.to_owned())
    }
}

/// One part of a [`ModelOutput::Content`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A file, base64-encoded (raw bytes do not cross the durable JSON boundary). Over MCP an
    /// `image/*` file is an image block and an `audio/*` file an audio block.
    File {
        /// The base64 data.
        data: String,
        /// The media type, e.g. `image/png`.
        #[serde(rename = "mediaType")]
        media_type: String,
    },
    /// A file the runtime stored once (in its store, or in the sandbox when the runtime has
    /// one) in place of a [`File`](ContentPart::File) part: recorded results, events and stored
    /// conversations carry this reference, never the bytes again. The model loop and the MCP
    /// server put the bytes back (as a file part) before a request or a response leaves the
    /// process; a host reads them with `Runtime::attachment` or
    /// `Turn::resolve_attachments`. Tools do not build it.
    Attachment {
        /// The attachment's id within its session: `sha256:` and the hex digest of the bytes,
        /// so the same file returned twice is stored once.
        id: String,
        /// The media type, e.g. `image/png`.
        #[serde(rename = "mediaType")]
        media_type: String,
        /// The decoded size in bytes.
        size: u64,
        /// Where the file is in the sandbox, relative to its root, when the runtime has one
        /// (tools that work on files, such as `read` or a command, can open it there).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// A resource embedded in the output (MCP's `resource` block): its URI and its contents,
    /// as text or as base64 data. Build it with [`ContentPart::resource_text`] or
    /// [`ContentPart::resource_data`].
    Resource {
        /// The resource's URI.
        uri: String,
        /// The media type, e.g. `application/json`.
        #[serde(rename = "mediaType", default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
        /// The contents as text, for a text resource.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The contents as base64 data, for a binary resource.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text { text: text.into() }
    }

    /// A file part from base64 `data` of `media_type`.
    pub fn file(data: impl Into<String>, media_type: impl Into<String>) -> Self {
        ContentPart::File {
            data: data.into(),
            media_type: media_type.into(),
        }
    }

    /// An embedded text resource: `text` at `uri`, of `media_type`.
    ///
    /// ```
    /// use toolwright_core::{ContentPart, ModelOutput};
    /// let part = ContentPart::resource_text("test://report", "application/json", r#"{"ok":true}"#);
    /// assert_eq!(ModelOutput::content([part]).to_text(), "[resource test://report]\n{\"ok\":true}");
    /// ```
    pub fn resource_text(
        uri: impl Into<String>,
        media_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        ContentPart::Resource {
            uri: uri.into(),
            media_type: Some(media_type.into()),
            text: Some(text.into()),
            data: None,
        }
    }

    /// An embedded binary resource: base64 `data` at `uri`, of `media_type`.
    pub fn resource_data(
        uri: impl Into<String>,
        media_type: impl Into<String>,
        data: impl Into<String>,
    ) -> Self {
        ContentPart::Resource {
            uri: uri.into(),
            media_type: Some(media_type.into()),
            text: None,
            data: Some(data.into()),
        }
    }
}

/// The result of one successful execution, before the runtime wraps it in events.
#[derive(Clone, Debug, PartialEq)]
pub struct CallOutput {
    /// The raw output, serialized to JSON.
    pub value: Value,
    /// Whether this call may end the turn (`ends_turn`, evaluated on the output).
    pub ends_turn: bool,
    /// The model's projection (`to_model_output`), if the tool has one.
    pub model: Option<ModelOutput>,
    /// The rendered `label(complete = ...)`, if the tool has one.
    pub complete_label: Option<String>,
}

impl CallOutput {
    /// What the model sees: the projection if there is one, else the raw output as JSON.
    pub fn for_model(&self) -> ModelOutput {
        match &self.model {
            Some(projection) => projection.clone(),
            None => ModelOutput::Json(self.value.clone()),
        }
    }
}

/// A state the user can fix, returned as data instead of an error (the model then asks the user
/// for what is needed and calls again).
///
/// ```
/// use toolwright_core::Status;
/// let status = Status::verification_required(
///     "login",
///     ["sms"],
///     "treehole needs SMS verification: call treehole__send_code first, then retry with `code`",
/// );
/// assert_eq!(serde_json::to_value(&status).unwrap()["status"], "verification_required");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Status {
    /// The state, e.g. `verification_required`.
    pub status: String,
    /// What kind of thing is needed, e.g. `login`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// How the user can resolve it, e.g. `["sms"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// What the model should tell the user and do next.
    pub message: String,
}

impl Status {
    /// A status object with `status` and `message`.
    pub fn new(status: impl Into<String>, message: impl Into<String>) -> Self {
        Status {
            status: status.into(),
            kind: None,
            methods: Vec::new(),
            message: message.into(),
        }
    }

    /// `verification_required` of `kind`, resolvable by `methods`.
    pub fn verification_required<M: Into<String>>(
        kind: impl Into<String>,
        methods: impl IntoIterator<Item = M>,
        message: impl Into<String>,
    ) -> Self {
        Status {
            status: "verification_required".into(),
            kind: Some(kind.into()),
            methods: methods.into_iter().map(Into::into).collect(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn to_text_writes_each_kind_of_output_as_text() {
        assert_eq!(ModelOutput::text("3 rows").to_text(), "3 rows");
        assert_eq!(
            ModelOutput::Json(json!({ "rows": [1, null] })).to_text(),
            r#"{"rows":[1,null]}"#
        );
        let content = ModelOutput::content([
            ContentPart::text("Before."),
            ContentPart::file("aGk=", "image/png"),
            ContentPart::text("After."),
        ]);
        assert_eq!(content.to_text(), "Before.\n[image/png file]\nAfter.");
        assert_eq!(ModelOutput::content([]).to_text(), "");
    }
}
