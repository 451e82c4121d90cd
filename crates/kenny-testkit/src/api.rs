//! A client of `/api` (and any other JSON route): a bearer token or none, and replies
//! as status, headers and JSON body, so a test asserts on what a client would see.

use reqwest::Method;
use serde_json::Value;

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// The body as JSON, or `Value::String` of the text when it is not JSON.
    pub body: Value,
}

impl Reply {
    pub(crate) fn parse(status: u16, headers: reqwest::header::HeaderMap, text: String) -> Self {
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Reply { status, headers, body }
    }

    /// The `error.code` of an error body, if it is one.
    pub fn error_code(&self) -> Option<&str> {
        self.body.pointer("/error/code").and_then(Value::as_str)
    }

    pub fn error_message(&self) -> &str {
        self.body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    pub fn new(base: &str, token: Option<&str>) -> Self {
        Api {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
        }
    }

    /// The same client with another bearer token.
    pub fn with_token(&self, token: &str) -> Self {
        Api {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.send(Method::PUT, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.send(Method::PATCH, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Reply> {
        self.send(Method::DELETE, path, None).await
    }

    /// A POST with no body at all, as the dashboard's action buttons send it.
    pub async fn post_empty(&self, path: &str) -> anyhow::Result<Reply> {
        read(self.request(Method::POST, path).send().await?).await
    }

    /// A body sent as it is, with its content type (malformed JSON, a form...).
    pub async fn post_raw(&self, path: &str, content_type: &str, body: &'static str) -> anyhow::Result<Reply> {
        let request = self
            .request(Method::POST, path)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        read(request.send().await?).await
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> anyhow::Result<Reply> {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await?).await
    }
}

async fn read(response: reqwest::Response) -> anyhow::Result<Reply> {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await?;
    Ok(Reply::parse(status, headers, text))
}
