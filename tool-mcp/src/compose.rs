//! An `rmcp` handler served beside the runtime's tools: its prompts, resources, resource
//! templates, resource subscriptions and completions (see [`McpServer::compose`]).

#![allow(deprecated)] // resources/subscribe and /unsubscribe: legacy methods older peers use.

use futures_util::future::BoxFuture;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::McpServer;

/// The part of an `rmcp` [`ServerHandler`] that [`McpServer`] hands on, as an object (rmcp's
/// trait returns `impl Future`, which a `dyn` cannot).
pub(crate) trait Composed: Send + Sync + 'static {
    fn info(&self) -> ServerConfig;
    fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<CompleteResult, ErrorData>>;
    fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<GetPromptResponse, ErrorData>>;
    fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ListPromptsResult, ErrorData>>;
    fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ListResourcesResult, ErrorData>>;
    fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ListResourceTemplatesResult, ErrorData>>;
    fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ReadResourceResponse, ErrorData>>;
    fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<(), ErrorData>>;
    fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<(), ErrorData>>;
}

impl<H: ServerHandler> Composed for H {
    fn info(&self) -> ServerConfig {
        self.get_info()
    }
    fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<CompleteResult, ErrorData>> {
        Box::pin(ServerHandler::complete(self, request, cx))
    }
    fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<GetPromptResponse, ErrorData>> {
        Box::pin(ServerHandler::get_prompt(self, request, cx))
    }
    fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ListPromptsResult, ErrorData>> {
        Box::pin(ServerHandler::list_prompts(self, request, cx))
    }
    fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ListResourcesResult, ErrorData>> {
        Box::pin(ServerHandler::list_resources(self, request, cx))
    }
    fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ListResourceTemplatesResult, ErrorData>> {
        Box::pin(ServerHandler::list_resource_templates(self, request, cx))
    }
    fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<ReadResourceResponse, ErrorData>> {
        Box::pin(ServerHandler::read_resource(self, request, cx))
    }
    fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<(), ErrorData>> {
        Box::pin(ServerHandler::subscribe(self, request, cx))
    }
    fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> BoxFuture<'_, Result<(), ErrorData>> {
        Box::pin(ServerHandler::unsubscribe(self, request, cx))
    }
}

impl McpServer {
    /// `self` serving `handler`'s prompts, resources, resource templates, resource
    /// subscriptions and completions beside the runtime's tools: an existing `rmcp` server
    /// keeps them when its tools move to toolwright. The capabilities `handler` announces for
    /// them (and its instructions) join the server's; its tools, if it has any, are not served
    /// (toolwright's tools are, through the runtime's policies). Compose one handler; a second
    /// call replaces the first.
    ///
    /// ```no_run
    /// use toolwright::mcp::rmcp::{ServerHandler, model::ServerConfig};
    /// # #[derive(Clone)] struct Docs;
    /// # impl ServerHandler for Docs { fn get_info(&self) -> ServerConfig { ServerConfig::default() } }
    /// # async fn demo(runtime: toolwright::runtime::Runtime) -> Result<(), toolwright::mcp::McpError> {
    /// let server = toolwright::mcp::McpServer::new(runtime).compose(Docs);
    /// toolwright::mcp::serve_stdio(server).await
    /// # }
    /// ```
    #[must_use]
    pub fn compose(mut self, handler: impl ServerHandler) -> Self {
        self.composed = Some(std::sync::Arc::new(handler));
        self
    }
}

/// The error for a method no composed handler serves.
pub(crate) fn not_served<M: rmcp::model::ConstString>() -> ErrorData {
    ErrorData::method_not_found::<M>()
}
