//! Checks on the raw JSON of a request, before rmcp parses it: rmcp's parser resolves duplicate
//! keys last-wins, while toolwright's strict parser refuses them (and numbers that would change,
//! and nesting too deep). A `tools/call` whose `arguments` the strict parser refuses is answered
//! as in process: an `isError` result with the parser's message (the model sees it and can
//! call again; the tool does not run), over HTTP (from the guard) and over stdio (from
//! [`CheckedLines`], which reads the lines before rmcp does).

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServiceExt};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::{McpError, McpServer};

/// The longest line read over stdio (as rmcp's own limit); longer lines are dropped.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// What the checks need of a JSON-RPC message; anything else is left to rmcp.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// What the checks need of a request's `params`: a `tools/call`'s name and raw arguments, and
/// any request's `_meta`.
#[derive(Deserialize)]
struct Params<'a> {
    name: Option<String>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    /// Kept raw: a `_meta` rmcp cannot read must not stop the arguments' check.
    #[serde(borrow, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// What the HTTP guard learns from a request body.
pub(crate) struct Inspected {
    /// The JSON-RPC method, when the body is a request or notification.
    pub(crate) method: Option<String>,
    /// The request's `_meta` (where a 2026-07-28 request names its protocol version).
    pub(crate) meta: Option<rmcp::model::RequestMetaObject>,
    /// The error response when the request is refused here.
    pub(crate) refused: Option<String>,
}

/// Reads the envelope of `body` and checks a `tools/call`'s raw `arguments` with toolwright's
/// strict parser; reads its `_meta` too when `with_meta` (only a request naming a session needs
/// it, to tell how rmcp will serve it).
pub(crate) fn inspect(body: &[u8], with_meta: bool) -> Inspected {
    let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(body) else {
        return Inspected {
            method: None,
            meta: None,
            refused: None,
        };
    };
    // Read once: a `tools/call`'s arguments may be megabytes.
    let params = envelope
        .params
        .and_then(|params| serde_json::from_str::<Params<'_>>(params.get()).ok());
    let refused = params.as_ref().and_then(|p| refusal(&envelope, p));
    Inspected {
        method: envelope.method,
        meta: params
            .and_then(|params| params.meta)
            .filter(|_| with_meta)
            .and_then(|meta| serde_json::from_str(meta.get()).ok()),
        refused,
    }
}

/// The response (one line of JSON) to a `tools/call` request whose raw `arguments` the strict
/// parser refuses: the `isError` result a step gives the model for them in process.
fn refusal(envelope: &Envelope<'_>, params: &Params<'_>) -> Option<String> {
    let id = envelope.id?;
    if envelope.method.as_deref() != Some("tools/call") {
        return None;
    }
    let arguments = params.arguments?;
    // Non-object arguments are malformed params, which the handler reports.
    if !arguments.get().starts_with('{') {
        return None;
    }
    let name = params.name.as_deref().unwrap_or_default();
    let error = toolwright_core::json::parse_arguments(name, arguments.get()).err()?;
    let result = rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(
        error.to_string(),
    )]);
    let response = serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result });
    Some(response.to_string())
}

/// Serves `server` over a pair of byte streams, one JSON-RPC message per line: the stdio
/// transport over any reader and writer (pipes, sockets). Each line is read before rmcp parses
/// it, so a `tools/call` whose raw `arguments` toolwright's strict parser refuses (duplicate
/// keys, numbers that would change) gets the in-process error result with the parser's
/// message, as over HTTP. Returns when the reader ends.
pub async fn serve_io<R, W>(server: McpServer, read: R, write: W) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (rmcp_side, pump_side) = tokio::io::duplex(1 << 16);
    let (refusals, refused) = mpsc::channel(64);
    let pump = tokio::spawn(pump(read, pump_side, refusals));
    let transport = CheckedLines {
        inner: AsyncRwTransport::new_server(rmcp_side, write),
        refused,
    };
    let running = server
        .serve(transport)
        .await
        .map_err(|e| McpError::Transport(e.to_string()));
    let served = match running {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| McpError::Transport(e.to_string())),
        Err(error) => Err(error),
    };
    pump.abort();
    served
}

/// Reads lines from the client: refused ones are answered through `refusals`, the others go on
/// to rmcp unchanged.
async fn pump<R: AsyncRead + Unpin>(
    read: R,
    mut to_rmcp: tokio::io::DuplexStream,
    refusals: mpsc::Sender<String>,
) {
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && !line.ends_with(b"\n") {
            // Too long: dropped with the rest of the line, as rmcp does.
            if skip_line(&mut reader).await.is_err() {
                break;
            }
            tracing::warn!("an incoming MCP message exceeded {MAX_LINE} bytes and was dropped");
            continue;
        }
        if let Some(error) = inspect(&line, false).refused {
            if refusals.send(error).await.is_err() {
                break;
            }
            continue;
        }
        if to_rmcp.write_all(&line).await.is_err() {
            break;
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Reads and drops the rest of a line.
async fn skip_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<()> {
    let mut rest = Vec::new();
    loop {
        rest.clear();
        let n = (&mut *reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut rest)
            .await?;
        if n == 0 || rest.ends_with(b"\n") {
            return Ok(());
        }
    }
}

/// rmcp's line transport, also writing the errors for the lines [`pump`] refused.
struct CheckedLines<W: AsyncWrite> {
    inner: AsyncRwTransport<RoleServer, tokio::io::DuplexStream, W>,
    refused: mpsc::Receiver<String>,
}

impl<W> Transport<RoleServer> for CheckedLines<W>
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            // Both branches are cancel-safe: rmcp polls `receive` inside a `select!`. Refusals
            // first: the pump queues one before it lets rmcp read any later line or the end.
            tokio::select! {
                biased;
                Some(error) = self.refused.recv() => {
                    match serde_json::from_str::<ServerJsonRpcMessage>(&error) {
                        Ok(message) => {
                            let sent = self.inner.send(message);
                            tokio::spawn(async move {
                                if let Err(error) = sent.await {
                                    tracing::warn!("could not send an MCP error: {error}");
                                }
                            });
                        }
                        Err(error) => tracing::error!("an MCP refusal did not serialize: {error}"),
                    }
                }
                message = self.inner.receive() => return message,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_in_arguments_get_the_in_process_error_result() {
        let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recharge","arguments":{"amount":100,"amount":50000}}}"#;
        let inspected = inspect(body, false);
        assert_eq!(inspected.method.as_deref(), Some("tools/call"));
        let answer: serde_json::Value = serde_json::from_str(&inspected.refused.unwrap()).unwrap();
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["isError"], true);
        let expected =
            toolwright_core::json::parse_arguments("recharge", r#"{"amount":100,"amount":50000}"#)
                .unwrap_err()
                .to_string();
        assert_eq!(answer["result"]["content"][0]["text"], expected);
        assert!(expected.contains("duplicate key `amount`"), "{expected}");
    }

    #[test]
    fn other_messages_pass_to_rmcp() {
        for body in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1}}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":1,"a":2}}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            br#"not json"#,
        ] {
            assert!(inspect(body, false).refused.is_none(), "{}", String::from_utf8_lossy(body));
        }
    }
}
