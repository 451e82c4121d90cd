//! A browser as the server's pages see one: it keeps the cookies it is given, follows
//! no redirect by itself (tests look at where they point), posts forms, and calls
//! `/api` with its session cookie as the dashboard's script does.

use std::collections::BTreeMap;
use std::sync::Mutex;

use reqwest::Method;
use reqwest::header::{COOKIE, HeaderMap, LOCATION, SET_COOKIE};
use serde_json::Value;

use crate::Reply;

/// One page or redirect.
#[derive(Debug, Clone)]
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Page {
    pub fn location(&self) -> Option<&str> {
        self.headers.get(LOCATION).and_then(|v| v.to_str().ok())
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    /// The page's `<input type="hidden" name=… value=…>` fields, unescaped.
    pub fn hidden_fields(&self) -> BTreeMap<String, String> {
        let mut fields = BTreeMap::new();
        for input in self.text.split("<input type=\"hidden\" name=\"").skip(1) {
            let Some((name, rest)) = input.split_once('"') else {
                continue;
            };
            let Some(value) = rest.strip_prefix(" value=\"").and_then(|r| r.split_once('"')) else {
                continue;
            };
            fields.insert(name.to_owned(), unescape(value.0));
        }
        fields
    }

    /// The session's CSRF token, where a dashboard page hands it to its script
    /// (`<meta name="csrf-token">`), unescaped.
    pub fn csrf_token(&self) -> Option<String> {
        let after = self.text.split("<meta name=\"csrf-token\" content=\"").nth(1)?;
        Some(unescape(after.split('"').next()?))
    }

    /// The `form_token` a sign-in or set-up form carries.
    pub fn form_token(&self) -> Option<String> {
        let after = self.text.split("name=\"form_token\" value=\"").nth(1)?;
        Some(after.split('"').next()?.to_owned())
    }
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

pub struct Browser {
    http: reqwest::Client,
    base: String,
    cookies: Mutex<BTreeMap<String, String>>,
}

impl Browser {
    pub fn new(base: &str) -> Self {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            base: base.trim_end_matches('/').to_owned(),
            cookies: Mutex::default(),
        }
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Page> {
        let request = self.http.get(self.url(path));
        self.send(request).await
    }

    /// Posts a form, as a page of this server would (no `Origin` of another site).
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> anyhow::Result<Page> {
        self.post_form_with(path, fields, HeaderMap::new()).await
    }

    pub async fn post_form_with(
        &self,
        path: &str,
        fields: &[(&str, &str)],
        headers: HeaderMap,
    ) -> anyhow::Result<Page> {
        let request = self.http.post(self.url(path)).headers(headers).form(fields);
        self.send(request).await
    }

    /// A JSON request with the session cookie, as the dashboard's script sends it: the
    /// CSRF token goes in `X-CSRF-Token` when given (`None` shows what a request forged
    /// from another site gets); no body at all when `body` is `None`.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        csrf: Option<&str>,
    ) -> anyhow::Result<Reply> {
        let mut request = self.http.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(csrf) = csrf {
            request = request.header("x-csrf-token", csrf);
        }
        let page = self.send(request).await?;
        Ok(Reply::parse(page.status, page.headers, page.text))
    }

    /// Signs in through `/login`; the page it answers is the redirect that follows.
    pub async fn sign_in(&self, username: &str, password: &str) -> anyhow::Result<Page> {
        let form = self.get("/login").await?;
        let token = form
            .form_token()
            .ok_or_else(|| anyhow::anyhow!("no form token on /login: {}", form.text))?;
        self.post_form(
            "/login",
            &[("username", username), ("password", password), ("form_token", &token)],
        )
        .await
    }

    fn url(&self, path: &str) -> String {
        if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        }
    }

    async fn send(&self, mut request: reqwest::RequestBuilder) -> anyhow::Result<Page> {
        let cookie = {
            let jar = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
            jar.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        if !cookie.is_empty() {
            request = request.header(COOKIE, cookie);
        }
        let response = request.send().await?;
        {
            let mut jar = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
            for set in response.headers().get_all(SET_COOKIE) {
                let Some((pair, attributes)) = set.to_str().ok().map(|s| s.split_once(';').unwrap_or((s, ""))) else {
                    continue;
                };
                let Some((name, value)) = pair.split_once('=') else {
                    continue;
                };
                if attributes.to_ascii_lowercase().contains("max-age=0") || value.is_empty() {
                    jar.remove(name.trim());
                } else {
                    jar.insert(name.trim().to_owned(), value.trim().to_owned());
                }
            }
        }
        Ok(Page {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            text: response.text().await?,
        })
    }
}
