//! A small OAuth 2.1 authorization server on loopback, with what the MCP SDKs' authorization
//! flows use: RFC 8414 metadata, RFC 7591 dynamic client registration, an authorization
//! endpoint that approves at once (as the user `alice`) and redirects with the code (and RFC
//! 9207's `iss`), a token endpoint that checks PKCE S256 and RFC 8707's `resource` and issues
//! tokens whose audience is that resource, refresh, and RFC 7662 introspection for the
//! resource server. It records what it did, for the tests to check.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The resource server's credentials at the introspection endpoint.
pub(crate) const INTROSPECTION_CLIENT: (&str, &str) = ("toolwright-mcp", "introspection secret");

/// Scopes the server knows.
const SCOPES: [&str; 2] = ["tools", "admin"];

/// One authorization code, as the authorization request made it.
#[derive(Clone, Debug)]
struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: String,
    scope: String,
}

/// One access token.
#[derive(Clone, Debug)]
struct Token {
    client_id: String,
    audience: String,
    scope: String,
}

/// What a client exchanged at the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Issued {
    /// The registered client's name.
    pub(crate) client_name: String,
    /// `authorization_code` or `refresh_token`.
    pub(crate) grant: String,
    /// The `resource` the client sent, the token's audience.
    pub(crate) resource: String,
    pub(crate) scope: String,
}

#[derive(Default)]
struct Books {
    clients: HashMap<String, Value>,
    codes: HashMap<String, Code>,
    tokens: HashMap<String, Token>,
    refresh: HashMap<String, Token>,
    issued: Vec<Issued>,
    introspections: usize,
}

struct Server {
    issuer: String,
    books: Mutex<Books>,
}

impl Server {
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running authorization server.
pub(crate) struct AuthorizationServer {
    server: Arc<Server>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AuthorizationServer {
    pub(crate) async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let server = Arc::new(Server {
            issuer: format!("http://{}", listener.local_addr().unwrap()),
            books: Mutex::default(),
        });
        let router = axum::Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/introspect", post(introspect))
            .with_state(Arc::clone(&server));
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        AuthorizationServer { server, task }
    }

    /// Its issuer identifier, `http://127.0.0.1:<port>`.
    pub(crate) fn issuer(&self) -> &str {
        &self.server.issuer
    }

    pub(crate) fn introspection_endpoint(&self) -> String {
        format!("{}/introspect", self.server.issuer)
    }

    /// The tokens issued so far.
    pub(crate) fn issued(&self) -> Vec<Issued> {
        self.server.books().issued.clone()
    }

    /// How many introspection requests it answered.
    pub(crate) fn introspections(&self) -> usize {
        self.server.books().introspections
    }
}

/// A JSON response.
fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// A form's (or a query's) fields.
fn fields(form: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(form).into_owned().collect()
}

async fn metadata(State(server): State<Arc<Server>>) -> Response {
    let issuer = &server.issuer;
    json_response(
        StatusCode::OK,
        &json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
            "introspection_endpoint": format!("{issuer}/introspect"),
            "scopes_supported": SCOPES,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": true,
        }),
    )
}

/// An OAuth error response (RFC 6749 section 5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    json_response(
        status,
        &json!({ "error": error, "error_description": description }),
    )
}

async fn register(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let Ok(Value::Object(mut client)) = serde_json::from_slice::<Value>(&body) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_client_metadata",
            "not JSON",
        );
    };
    let redirects_ok = client
        .get("redirect_uris")
        .and_then(Value::as_array)
        .is_some_and(|uris| !uris.is_empty() && uris.iter().all(Value::is_string));
    if !redirects_ok {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_redirect_uri",
            "redirect_uris is required",
        );
    }
    let client_id = uuid::Uuid::new_v4().to_string();
    client.insert("client_id".into(), json!(client_id));
    client.insert("client_id_issued_at".into(), json!(1_700_000_000));
    client.insert("token_endpoint_auth_method".into(), json!("none"));
    server
        .books()
        .clients
        .insert(client_id, Value::Object(client.clone()));
    json_response(StatusCode::CREATED, &Value::Object(client))
}

/// Approves at once: the user is `alice`, and she consents.
async fn authorize(State(server): State<Arc<Server>>, uri: Uri) -> Response {
    let query = fields(uri.query().unwrap_or_default().as_bytes());
    let param = |name: &str| query.get(name).map(String::as_str).unwrap_or_default();
    let Some(client) = server.books().clients.get(param("client_id")).cloned() else {
        return (StatusCode::BAD_REQUEST, "unknown client_id").into_response();
    };
    let registered = client["redirect_uris"]
        .as_array()
        .is_some_and(|uris| uris.iter().any(|uri| uri == param("redirect_uri")));
    if !registered {
        return (StatusCode::BAD_REQUEST, "redirect_uri is not registered").into_response();
    }
    let refusal = if param("response_type") != "code" {
        Some("response_type must be code")
    } else if param("code_challenge").is_empty() || param("code_challenge_method") != "S256" {
        Some("PKCE with S256 is required")
    } else if param("resource").is_empty() {
        Some("resource (RFC 8707) is required")
    } else {
        None
    };
    if let Some(refusal) = refusal {
        return (StatusCode::BAD_REQUEST, refusal).into_response();
    }
    let code = uuid::Uuid::new_v4().to_string();
    server.books().codes.insert(
        code.clone(),
        Code {
            client_id: param("client_id").into(),
            redirect_uri: param("redirect_uri").into(),
            challenge: param("code_challenge").into(),
            resource: param("resource").into(),
            scope: param("scope").into(),
        },
    );
    let mut location = reqwest::Url::parse(param("redirect_uri")).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", param("state"))
        .append_pair("iss", &server.issuer);
    (
        StatusCode::FOUND,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn token(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let form = fields(&body);
    let param = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    let mut books = server.books();
    let (token, grant) = match param("grant_type") {
        "authorization_code" => {
            let Some(code) = books.codes.remove(param("code")) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "unknown code");
            };
            let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(param("code_verifier")));
            let refusal = if code.client_id != param("client_id") {
                Some("the code was issued to another client")
            } else if code.redirect_uri != param("redirect_uri") {
                Some("redirect_uri differs from the authorization request's")
            } else if challenge != code.challenge {
                Some("code_verifier does not match the code_challenge (PKCE S256)")
            } else if code.resource != param("resource") {
                Some("resource differs from the authorization request's (RFC 8707)")
            } else {
                None
            };
            if let Some(refusal) = refusal {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", refusal);
            }
            let token = Token {
                client_id: code.client_id,
                audience: code.resource,
                scope: code.scope,
            };
            (token, "authorization_code")
        }
        "refresh_token" => {
            let Some(mut token) = books.refresh.get(param("refresh_token")).cloned() else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "unknown refresh_token",
                );
            };
            if !param("resource").is_empty() {
                token.audience = param("resource").into();
            }
            (token, "refresh_token")
        }
        _ => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "authorization_code or refresh_token",
            );
        }
    };
    let client_name = books.clients[&token.client_id]["client_name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    books.issued.push(Issued {
        client_name,
        grant: grant.into(),
        resource: token.audience.clone(),
        scope: token.scope.clone(),
    });
    let access = uuid::Uuid::new_v4().to_string();
    let refresh = uuid::Uuid::new_v4().to_string();
    books.tokens.insert(access.clone(), token.clone());
    books.refresh.insert(refresh.clone(), token.clone());
    json_response(
        StatusCode::OK,
        &json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": 3600,
            "scope": token.scope,
            "refresh_token": refresh,
        }),
    )
}

async fn introspect(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (id, secret) = INTROSPECTION_CLIENT;
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!("{id}:{}", secret.replace(' ', "+")))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(expected.as_str())
    {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "the resource server's credentials are wrong",
        );
    }
    let form = fields(&body);
    let mut books = server.books();
    books.introspections += 1;
    let answer = match form.get("token").and_then(|token| books.tokens.get(token)) {
        Some(token) => json!({
            "active": true,
            "sub": "alice",
            "iss": server.issuer,
            "client_id": token.client_id,
            "aud": token.audience,
            "scope": token.scope,
            "token_type": "Bearer",
        }),
        None => json!({ "active": false }),
    };
    json_response(StatusCode::OK, &answer)
}
