//! Error pages name who is signed in. `WebError` renders its page without
//! the request, so the page says "Not signed in" and leaves a
//! [`ShownError`] on the response; this middleware looks the session up
//! (only for error pages, only when a session cookie came) and renders the
//! page again with the name.

use actix_web::{
    Error, FromRequest,
    body::{EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
};

use super::{
    pages::{ShownError, WebError},
    session::MaybeUser,
};

pub async fn with_user(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let has_cookie = req.headers().contains_key(actix_web::http::header::COOKIE);
    let response = with_a_page(next.call(req).await?);
    let shown = response
        .response()
        .extensions()
        .get::<ShownError>()
        .cloned();
    // A 503 says the database is unavailable: looking up the session would
    // only wait for it a second time.
    let unavailable = response.status() == actix_web::http::StatusCode::SERVICE_UNAVAILABLE;
    let Some(shown) = shown.filter(|_| has_cookie && !unavailable) else {
        return Ok(response);
    };
    let user = MaybeUser::extract(response.request()).await;
    let Ok(MaybeUser(Some(user))) = user else {
        // Signed out, or the session cannot be read now: the page as it was.
        return Ok(response);
    };
    let (request, old) = response.into_parts();
    let mut page = shown.render(Some(user.display_name));
    // The page changes, not what it says to the client: keep `Retry-After`
    // and the cookies it sets or removes (a sign-in's, once answered).
    if let Some(retry_after) = old.headers().get(actix_web::http::header::RETRY_AFTER) {
        page.headers_mut()
            .insert(actix_web::http::header::RETRY_AFTER, retry_after.clone());
    }
    for cookie in old.headers().get_all(actix_web::http::header::SET_COOKIE) {
        page.headers_mut()
            .append(actix_web::http::header::SET_COOKIE, cookie.clone());
    }
    Ok(ServiceResponse::new(request, page).map_into_right_body())
}

/// actix answers an address no page has, or a page's address with a
/// method it does not take, with an empty 404: a person following an old
/// bookmark or a mistyped link gets a page that says so instead.
fn with_a_page<B: MessageBody>(response: ServiceResponse<B>) -> ServiceResponse<EitherBody<B>> {
    use actix_web::{ResponseError, body::BodySize, http::StatusCode};
    if response.status() != StatusCode::NOT_FOUND
        || response.response().body().size() != BodySize::Sized(0)
    {
        // Not actix's, or a page of ours already.
        return response.map_into_left_body();
    }
    let (request, _) = response.into_parts();
    ServiceResponse::new(request, WebError::NotFound.error_response()).map_into_right_body()
}
