//! `GET /d/agent/{file}`: the release files of [`super::releases`], served to anyone
//! (binaries are not secrets; the signed manifests are what agents and install
//! scripts trust).

use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::releases::{dir, parse_name};
use crate::state::Site;

/// `GET /d/agent/{file}`: a release file, by its exact name, streamed (a build may be
/// large and this route needs no sign-in, so nothing here holds a whole file in memory).
pub(crate) async fn download(State(site): State<Site>, UrlPath(file): UrlPath<String>) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, "no such agent build\n").into_response();
    if parse_name(&file).is_none() {
        return not_found();
    }
    let path = dir(&site.config.data_dir).join(&file);
    let Ok(opened) = tokio::fs::File::open(&path).await else {
        return not_found();
    };
    let Ok(meta) = opened.metadata().await else {
        return not_found();
    };
    if !meta.is_file() {
        return not_found();
    }
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(opened));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(meta.len()));
    response
}
