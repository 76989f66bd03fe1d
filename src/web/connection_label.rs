//! Renaming a connection on the connections page (`POST
//! /connections/label`, CSRF-checked): the label tells a person's accounts
//! at one provider apart, and is what tools take as `account` and what the
//! account question lists, so a label another of the user's accounts at
//! that provider has is refused. A renamed label survives reconnects.

use actix_web::{HttpResponse, web};
use uuid::Uuid;

use super::{
    forms,
    pages::{WebError, see_other},
    session::SignedInUser,
};
use crate::{
    db::connections::Renamed,
    domain::shown_text::{self, MAX_LABEL_CHARS},
    state::AppState,
};

pub const LABEL_PATH: &str = "/connections/label";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(LABEL_PATH, web::post().to(rename));
}

pub fn purpose(connection_id: Uuid) -> String {
    format!("label:{connection_id}")
}

async fn rename(
    state: web::Data<AppState>,
    user: SignedInUser,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let connection_id = form
        .get("connection")
        .and_then(|c| Uuid::parse_str(c).ok())
        .ok_or(WebError::BadRequest(
            "The form is incomplete. Go back and reload the page.",
        ))?;
    user.check_csrf(&purpose(connection_id), &form)?;
    let label = form.get("label").map(str::trim).unwrap_or_default();
    let fits = !label.is_empty()
        && label.chars().count() <= MAX_LABEL_CHARS
        && label.chars().all(shown_text::is_shown);
    if !fits {
        return Err(WebError::BadRequest(
            "A label is 1 to 64 characters, without control characters or invisible ones (direction marks, zero-width spaces).",
        ));
    }
    match state
        .connect
        .rename(user.user(), connection_id, label)
        .await?
    {
        // Not theirs: nothing to say about another's connection.
        Renamed::Renamed | Renamed::NotFound => Ok(see_other("/connections")),
        Renamed::LabelTaken => Err(WebError::Conflict(
            "Another of your accounts at this provider already has this label, or this is its \
             account id (which tools take for that account), so tools could not tell them apart. \
             Nothing was changed: go back and choose a different label.",
        )),
    }
}
