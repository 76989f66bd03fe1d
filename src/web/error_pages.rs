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

use super::{pages::ShownError, session::MaybeUser};

pub async fn with_user(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let has_cookie = req.headers().contains_key(actix_web::http::header::COOKIE);
    let response = next.call(req).await?;
    let shown = response
        .response()
        .extensions()
        .get::<ShownError>()
        .cloned();
    // A 503 says the database is unavailable: looking up the session would
    // only wait for it a second time.
    let unavailable = response.status() == actix_web::http::StatusCode::SERVICE_UNAVAILABLE;
    let Some(shown) = shown.filter(|_| has_cookie && !unavailable) else {
        return Ok(response.map_into_left_body());
    };
    let user = MaybeUser::extract(response.request()).await;
    let Ok(MaybeUser(Some(user))) = user else {
        // Signed out, or the session cannot be read now: the page as it was.
        return Ok(response.map_into_left_body());
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
