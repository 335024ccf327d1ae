//! A [`ProtectedResource`] as the running server holds it: the canonical URI, the metadata
//! document serialized once, where it is published, and what tokens must carry.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use serde_json::{Value, json};

use super::ProtectedResource;
use crate::McpError;

/// The well-known path of RFC 9728 (section 3).
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// Fields of the metadata document the server writes itself.
const DERIVED_FIELDS: [&str; 4] = [
    "resource",
    "authorization_servers",
    "scopes_supported",
    "bearer_methods_supported",
];

/// The protected resource of a running server.
#[derive(Debug)]
pub(crate) struct Resource {
    /// The canonical URI as published.
    pub(crate) uri: String,
    /// The URI in the form audiences are compared in (see [`comparable`]).
    comparable: String,
    /// Audiences accepted besides the URI, as configured.
    audiences: Vec<String>,
    /// Scopes every token must grant.
    pub(crate) required_scopes: Vec<String>,
    /// The resource's authority as an entry of the allowed `Host`s: its host, with its port
    /// when the URI names one.
    pub(crate) host: String,
    /// Where the metadata document is, as `resource_metadata` names it in challenges.
    pub(crate) metadata_url: String,
    /// The paths it is served at: the root well-known path, and the path-suffixed one for a
    /// resource with a path.
    paths: Vec<String>,
    document: String,
}

impl Resource {
    /// Checks `declared` and completes it with the address the server listens at.
    pub(crate) fn resolve(declared: ProtectedResource, addr: SocketAddr) -> Result<Self, McpError> {
        let bad = |what: String| McpError::Config(format!("protected resource: {what}"));
        let uri = match declared.resource {
            Some(uri) => uri,
            None if addr.ip().is_unspecified() => {
                return Err(bad(format!(
                    "the server listens on {addr}, which is no address clients use; set \
                     `ProtectedResource::resource` to the MCP endpoint's URL (e.g. \
                     `https://mcp.example.com/mcp`)"
                )));
            }
            None => format!("http://{addr}/mcp"),
        };
        let url = http_url(&uri).map_err(|e| bad(format!("the resource `{uri}` {e}")))?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad(format!(
                "the resource `{uri}` has a query or fragment; give the MCP endpoint's URL \
                 without them"
            )));
        }
        if declared.authorization_servers.is_empty() {
            return Err(bad("no authorization server".into()));
        }
        for issuer in &declared.authorization_servers {
            http_url(issuer)
                .map_err(|e| bad(format!("the authorization server `{issuer}` {e}")))?;
        }
        if let Some(name) = DERIVED_FIELDS
            .iter()
            .find(|name| declared.fields.contains_key(**name))
        {
            return Err(bad(format!(
                "the metadata field `{name}` is written by the server; use the \
                 `ProtectedResource` method for it instead of `field`"
            )));
        }
        let path = url.path().trim_end_matches('/');
        let mut paths = vec![WELL_KNOWN.to_owned()];
        if !path.is_empty() {
            if !path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~/%!$&'()+,;=@".contains(&b))
            {
                return Err(bad(format!(
                    "the resource's path `{path}` has characters the server cannot route"
                )));
            }
            paths.push(format!("{WELL_KNOWN}{path}"));
        }
        let origin = url.origin().ascii_serialization();
        let host = url.host_str().unwrap_or_default();
        let host = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let metadata_url = format!(
            "{origin}{}",
            paths.last().map_or(WELL_KNOWN, String::as_str)
        );
        let mut scopes = declared.scopes_supported;
        for scope in &declared.required_scopes {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        let mut document = serde_json::Map::new();
        document.insert("resource".into(), json!(uri));
        document.insert(
            "authorization_servers".into(),
            json!(declared.authorization_servers),
        );
        if !scopes.is_empty() {
            document.insert("scopes_supported".into(), json!(scopes));
        }
        document.insert("bearer_methods_supported".into(), json!(["header"]));
        document.extend(declared.fields);
        Ok(Resource {
            comparable: comparable(&uri).unwrap_or_else(|| uri.clone()),
            uri,
            audiences: declared.audiences,
            required_scopes: declared.required_scopes,
            host,
            metadata_url,
            paths,
            document: Value::Object(document).to_string(),
        })
    }

    /// Whether a token issued for `audience` was issued for this resource.
    pub(crate) fn accepts(&self, audience: &str) -> bool {
        self.audiences.iter().any(|accepted| accepted == audience)
            || comparable(audience).is_some_and(|audience| audience == self.comparable)
    }

    /// The routes of the metadata document, outside the guard: it is public, and clients fetch
    /// it before they have a token (browsers from other origins too, hence CORS).
    pub(crate) fn routes(self: &Arc<Self>) -> axum::Router {
        let mut router = axum::Router::new();
        for path in &self.paths {
            let resource = Arc::clone(self);
            router = router.route(
                path,
                axum::routing::get(move || async move { resource.metadata() }).options(preflight),
            );
        }
        router
    }

    fn metadata(&self) -> Response {
        Response::builder()
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
            .header(http::header::CACHE_CONTROL, "max-age=3600")
            .body(Body::from(self.document.clone()))
            .unwrap_or_default()
    }
}

/// A browser's preflight for the metadata: MCP clients send `MCP-Protocol-Version` with it.
async fn preflight() -> Response {
    Response::builder()
        .status(http::StatusCode::NO_CONTENT)
        .header(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
        .header(http::header::ACCESS_CONTROL_ALLOW_METHODS, "GET, OPTIONS")
        .header(http::header::ACCESS_CONTROL_ALLOW_HEADERS, "*")
        .header(http::header::ACCESS_CONTROL_MAX_AGE, "86400")
        .body(Body::empty())
        .unwrap_or_default()
}

/// `uri` parsed as an absolute `http` or `https` URL with a host.
pub(super) fn http_url(uri: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(uri).map_err(|e| format!("is not an absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err("is not an `http` or `https` URL with a host".into());
    }
    Ok(url)
}

/// A resource URI in the form two names of one resource share: parsed (scheme and host in lower
/// case, a default port dropped), without its fragment and without one trailing `/` (what
/// clients' own comparisons ignore). `None` when it is no URL.
fn comparable(uri: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(uri).ok()?;
    url.set_fragment(None);
    let text = url.as_str();
    Some(text.strip_suffix('/').unwrap_or(text).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(declared: ProtectedResource) -> Result<Resource, McpError> {
        Resource::resolve(declared, "127.0.0.1:8765".parse().unwrap())
    }

    #[test]
    fn by_default_the_resource_is_the_loopback_endpoint() {
        let resource = resolve(ProtectedResource::new("http://127.0.0.1:9000")).unwrap();
        assert_eq!(resource.uri, "http://127.0.0.1:8765/mcp");
        assert_eq!(resource.host, "127.0.0.1:8765");
        assert_eq!(
            resource.metadata_url,
            "http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            resource.paths,
            [WELL_KNOWN, "/.well-known/oauth-protected-resource/mcp"]
        );
    }

    #[test]
    fn a_pathless_resource_is_published_at_the_root_only() {
        let resource = resolve(
            ProtectedResource::new("https://auth.example").resource("https://MCP.example.com/"),
        )
        .unwrap();
        assert_eq!(resource.paths, [WELL_KNOWN]);
        assert_eq!(resource.host, "mcp.example.com");
        assert_eq!(
            resource.metadata_url,
            "https://mcp.example.com/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn audiences_compare_as_urls_or_as_configured() {
        let resource = resolve(
            ProtectedResource::new("https://auth.example")
                .resource("https://mcp.example.com/mcp")
                .accept_audience("api://mcp"),
        )
        .unwrap();
        for same in [
            "https://mcp.example.com/mcp",
            "HTTPS://MCP.EXAMPLE.COM:443/mcp",
            "https://mcp.example.com/mcp/",
            "https://mcp.example.com/mcp#x",
            "api://mcp",
        ] {
            assert!(resource.accepts(same), "{same}");
        }
        for other in [
            "https://mcp.example.com",
            "https://mcp.example.com/mcp/other",
            "http://mcp.example.com/mcp",
            "https://mcp.example.com:8443/mcp",
            "https://evil.example/mcp",
            "api://MCP",
            "",
        ] {
            assert!(!resource.accepts(other), "{other}");
        }
    }

    #[test]
    fn mistakes_are_refused_with_what_to_do() {
        let error = |declared| resolve(declared).unwrap_err().to_string();
        let base = || ProtectedResource::new("https://auth.example");
        assert!(error(base().resource("mcp.example.com/mcp")).contains("not an absolute URL"));
        assert!(error(base().resource("ftp://mcp.example.com/mcp")).contains("`http` or `https`"));
        assert!(error(base().resource("https://mcp.example.com/mcp?x=1")).contains("query"));
        assert!(error(base().field("resource", json!("x"))).contains("`resource`"));
        assert!(error(ProtectedResource::new("auth")).contains("authorization server `auth`"));
        let unspecified = Resource::resolve(base(), "0.0.0.0:80".parse().unwrap()).unwrap_err();
        assert!(
            unspecified
                .to_string()
                .contains("ProtectedResource::resource")
        );
    }

    #[test]
    fn the_document_lists_what_clients_need() {
        let resource = resolve(
            ProtectedResource::new("http://127.0.0.1:9000")
                .scopes_supported(["read"])
                .required_scopes(["tools", "read"])
                .resource_name("Tools"),
        )
        .unwrap();
        let document: Value = serde_json::from_str(&resource.document).unwrap();
        assert_eq!(
            document,
            json!({
                "resource": "http://127.0.0.1:8765/mcp",
                "authorization_servers": ["http://127.0.0.1:9000"],
                "scopes_supported": ["read", "tools"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Tools",
            })
        );
    }
}
